# syntax=docker/dockerfile:1
# Two stages: install with npm (Bun arrives as a pinned dev dependency), then run on a
# slim Debian as an unprivileged user. Data (the SQLite file) lives on a volume.

FROM node:20-bookworm-slim AS install
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund && npm cache clean --force
COPY tsconfig.json bunfig.toml ./
COPY src ./src

FROM debian:bookworm-slim AS runtime
RUN groupadd --system --gid 10001 proxy \
 && useradd --system --uid 10001 --gid proxy --home-dir /app --shell /usr/sbin/nologin proxy \
 && mkdir -p /app/data && chown proxy:proxy /app/data
WORKDIR /app
COPY --from=install --chown=root:root /app /app
ENV NODE_ENV=production \
    PORT=8787 \
    HOST=0.0.0.0 \
    DATABASE_URL=sqlite:/app/data/proxy.sqlite \
    BUN_CONFIG_MAX_HTTP_REQUESTS=4096
USER proxy
VOLUME ["/app/data"]
EXPOSE 8787
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=3s --start-period=10s --retries=3 \
  CMD ["/app/node_modules/.bin/bun", "-e", "const r = await fetch('http://127.0.0.1:' + (process.env.PORT ?? 8787) + '/healthz'); process.exit(r.ok ? 0 : 1)"]
ENTRYPOINT ["/app/node_modules/.bin/bun", "src/index.ts"]
