# syntax=docker/dockerfile:1
# Stage 1 builds the single binary with the same command as `npm run build`
# (scripts/build.ts); stage 2 runs it alone on a distroless base as a non-root user.

FROM node:20-bookworm-slim AS build
WORKDIR /src
# Node 20 comes with npm 10, which ignores package.json's allowScripts (npm reads it from 11.16
# on): @openrouter/sdk's refused install script would reach out on every build. npm 11 first.
RUN npm install --global --no-audit --no-fund npm@11.19.1
COPY package.json package-lock.json ./
RUN npm ci --no-audit --no-fund
COPY tsconfig.json bunfig.toml ./
COPY scripts ./scripts
COPY src ./src
# npm run build also writes the mock upstream beside the binary; only the binary is copied on.
COPY packages/mock-upstream ./packages/mock-upstream
RUN npm run build \
 && mkdir -p /out/data \
 && cp dist/metered-proxy /out/metered-proxy

# glibc and libstdc++, no shell, no package manager; Bun's binary carries its own CA roots.
FROM gcr.io/distroless/cc-debian12:nonroot AS runtime
COPY --from=build /out/metered-proxy /usr/local/bin/metered-proxy
COPY --from=build --chown=nonroot:nonroot /out/data /data
ENV NODE_ENV=production \
    PORT=8787 \
    HOST=0.0.0.0 \
    DATABASE_URL=sqlite:/data/proxy.sqlite \
    BUN_CONFIG_MAX_HTTP_REQUESTS=4096
USER nonroot
WORKDIR /data
VOLUME ["/data"]
EXPOSE 8787
STOPSIGNAL SIGTERM
HEALTHCHECK --interval=15s --timeout=3s --retries=3 \
  CMD ["/usr/local/bin/metered-proxy", "healthcheck"]
ENTRYPOINT ["/usr/local/bin/metered-proxy"]
