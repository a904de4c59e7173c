import { describe, expect, test } from "bun:test";
import { existsSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { REPO_ROOT } from "../helpers/server";
import { ConfigError, loadConfig } from "../../src/config";

// No Docker daemon runs here, so deploy/compose.yaml is checked by a linter (dclint: the
// Compose schema plus its best-practice rules) and by reading it: two proxy instances on
// one Postgres and one Redis, sharing the session secret and the secrets key, each drained before SIGKILL.
const COMPOSE = "deploy/compose.yaml";
const composeText = readFileSync(join(REPO_ROOT, COMPOSE), "utf8");
const compose = Bun.YAML.parse(composeText) as ComposeFile;
const dockerfile = readFileSync(join(REPO_ROOT, "Dockerfile"), "utf8");
const envExample = readFileSync(join(REPO_ROOT, "deploy/.env.example"), "utf8");
const PROXIES = ["proxy-a", "proxy-b"] as const;

interface Healthcheck {
  test: string[];
  interval?: string;
  timeout?: string;
  retries?: number;
  start_period?: string;
}
interface Service {
  image?: string;
  build?: { context: string; dockerfile?: string };
  depends_on?: Record<string, { condition: string }>;
  volumes?: string[];
  environment?: Record<string, string>;
  ports?: string[];
  command?: string[];
  restart?: string;
  healthcheck?: Healthcheck;
  stop_grace_period?: string;
}
interface ComposeFile {
  name?: string;
  services: Record<string, Service>;
  volumes?: Record<string, unknown>;
}

function service(name: string): Service {
  const s = compose.services[name];
  expect(s).toBeDefined();
  return s!;
}

/** Compose durations: "45s", "1m30s", "500ms". */
function durationMs(text: string): number {
  const parts = [...text.matchAll(/(\d+(?:\.\d+)?)(ms|us|h|m|s)/g)];
  expect(parts.map((p) => p[0]).join("")).toBe(text);
  const unit = { h: 3_600_000, m: 60_000, s: 1000, ms: 1, us: 0.001 } as const;
  return parts.reduce((sum, p) => sum + Number(p[1]) * unit[p[2] as keyof typeof unit], 0);
}

/** "127.0.0.1:8788:8787" → host and container ports. */
function publishedPort(spec: string): { host: number; container: number } {
  const m = /^(?:[\d.]+:)?(\d+):(\d+)$/.exec(spec);
  expect(m).not.toBeNull();
  return { host: Number(m![1]), container: Number(m![2]) };
}

describe("deploy/compose.yaml", () => {
  test("dclint finds no issue (schema, errors and warnings)", () => {
    const lint = Bun.spawnSync([process.execPath, join(REPO_ROOT, "node_modules/dclint/bin/dclint.cjs"), "-f", "json", COMPOSE], { cwd: REPO_ROOT });
    const report = JSON.parse(lint.stdout.toString()) as { filePath: string; messages: { rule: string; type: string; message: string; line: number }[] }[];
    expect(report.length).toBe(1);
    expect(report[0]!.messages.map((m) => `${m.line}: ${m.type} ${m.rule}: ${m.message}`)).toEqual([]);
    expect(lint.exitCode).toBe(0);
  });

  test("Postgres 16 and Redis 7, pinned by tag, each with its health check", () => {
    const postgres = service("postgres");
    expect(postgres.image).toBe("postgres:16");
    const dataVolume = postgres.volumes?.find((v) => v.endsWith(":/var/lib/postgresql/data"));
    expect(dataVolume).toBeDefined();
    expect(Object.keys(compose.volumes ?? {})).toContain(dataVolume!.split(":")[0]!);
    expect(postgres.healthcheck?.test.slice(0, 2)).toEqual(["CMD", "pg_isready"]);
    expect(postgres.environment?.POSTGRES_PASSWORD).toStartWith("${POSTGRES_PASSWORD:?");
    expect(postgres.ports).toBeUndefined();

    const redis = service("redis");
    expect(redis.image).toBe("redis:7");
    expect(redis.healthcheck?.test).toEqual(["CMD", "redis-cli", "ping"]);
    expect(redis.ports).toBeUndefined();
  });

  test("two proxies built from the repository's Dockerfile, on distinct host ports", () => {
    const ports = PROXIES.map((name) => {
      const proxy = service(name);
      expect(proxy.image).toBeUndefined();
      expect(existsSync(join(resolve(REPO_ROOT, "deploy", proxy.build!.context), proxy.build!.dockerfile ?? "Dockerfile"))).toBe(true);
      expect(resolve(REPO_ROOT, "deploy", proxy.build!.context)).toBe(REPO_ROOT);
      expect(proxy.ports?.length).toBe(1);
      return publishedPort(proxy.ports![0]!);
    });
    expect(ports.map((p) => p.host)).toEqual([8787, 8788]);
    // The container port is the one the image listens on.
    const exposed = Number(/^EXPOSE (\d+)$/m.exec(dockerfile)![1]);
    for (const p of ports) expect(p.container).toBe(exposed);
  });

  test("both proxies share Postgres, Redis, one JWT_SECRET and one SECRETS_KEY, in production", () => {
    const [a, b] = PROXIES.map((name) => service(name).environment!);
    // Same environment on both: a session minted by one is accepted by the other.
    expect(b).toEqual(a!);
    expect(a!.NODE_ENV).toBe("production");
    expect(a!.JWT_SECRET).toMatch(/^\$\{JWT_SECRET(:\?[^}]*)?\}$/);
    expect(a!.SECRETS_KEY).toMatch(/^\$\{SECRETS_KEY(:\?[^}]*)?\}$/);
    expect(a!.UPSTREAM_API_KEY).toMatch(/^\$\{UPSTREAM_API_KEY(:\?[^}]*)?\}$/);
    // compose's own ${VAR} interpolation, as written in the file
    const db = new URL(a!.DATABASE_URL!.replace("${POSTGRES_PASSWORD}", "pw"));
    expect(a!.DATABASE_URL).toStartWith("postgres://");
    expect(db.hostname).toBe("postgres");
    expect(decodeURIComponent(db.password)).toBe("pw");
    expect(db.username).toBe(service("postgres").environment!.POSTGRES_USER!);
    expect(db.pathname).toBe(`/${service("postgres").environment!.POSTGRES_DB}`);
    expect(a!.REDIS_URL).toMatch(/^redis:\/\/redis:6379$/);
    // Set, or a user-funded link would send the user back to http://localhost:8787.
    expect(a!.PUBLIC_URL).toMatch(/^\$\{PUBLIC_URL:\?[^}]*\}$/);
    // The image has no shell to print the first start's key file with: a known path on its /data.
    expect(a!.DEFAULT_APP_KEY_FILE).toStartWith(`${/^VOLUME \["([^"]+)"\]$/m.exec(dockerfile)![1]}/`);
  });

  test("the proxies' environment, once interpolated, is a valid configuration", () => {
    const values: Record<string, string> = {
      POSTGRES_PASSWORD: "0123abcd",
      UPSTREAM_API_KEY: "sk-or-v1-test",
      JWT_SECRET: "j".repeat(32),
      SECRETS_KEY: Buffer.alloc(32, 7).toString("base64"),
      PUBLIC_URL: "https://ai.example.com",
    };
    // Compose interpolation: ${VAR}, ${VAR:?message}, ${VAR:-default}.
    const env = Object.fromEntries(
      Object.entries(service("proxy-a").environment!).map(([key, value]) => [
        key,
        value.replace(/\$\{([A-Z_][A-Z0-9_]*)(?::\?[^}]*|:-([^}]*))?\}/g, (_, name: string, fallback?: string) => values[name] ?? fallback ?? ""),
      ]),
    );
    expect(Object.values(env).join("")).not.toContain("$");
    const config = loadConfig(env);
    expect(config.env).toBe("production");
    expect(config.redisUrl).toBe("redis://redis:6379");
    expect(config.jwtSecret).toBe(values.JWT_SECRET!);
    expect(config.secretsKey).toBe(values.SECRETS_KEY!);
    expect(config.upstreamBaseUrl).toBe(loadConfig({}).upstreamBaseUrl);
    expect(config.publicUrl).toBe(values.PUBLIC_URL!);
  });

  test("every dependency is waited for until healthy, and has a health check", () => {
    for (const name of PROXIES) {
      const deps = service(name).depends_on!;
      expect(Object.keys(deps)).toEqual(expect.arrayContaining(["postgres", "redis"]));
      for (const [dep, { condition }] of Object.entries(deps)) {
        expect(condition).toBe("service_healthy");
        expect(service(dep).healthcheck).toBeDefined();
      }
    }
  });

  test("proxies probe /healthz with the image's own binary, restart, and drain before SIGKILL", () => {
    // The runtime image is distroless (no shell, curl or wget): the health check must be
    // the binary's `healthcheck` command, at the path the image installs it.
    const binary = /^ENTRYPOINT \["([^"]+)"\]$/m.exec(dockerfile)![1]!;
    const settleMs = Number(/const SETTLE_AFTER_CUT_MS = (\d+);/.exec(readFileSync(join(REPO_ROOT, "src/index.ts"), "utf8"))![1]);
    const graceDefault = loadConfig({}).shutdownGraceMs;
    for (const name of PROXIES) {
      const proxy = service(name);
      expect(proxy.healthcheck?.test).toEqual(["CMD", binary, "healthcheck"]);
      expect(proxy.restart).toBe("unless-stopped");
      const grace = Number(proxy.environment!.SHUTDOWN_GRACE_MS ?? graceDefault);
      // Compose SIGKILLs after stop_grace_period (default 10 s); the drain takes the grace,
      // then the settling of cut streams, then the ledger flush: keep a margin on top.
      expect(durationMs(proxy.stop_grace_period!)).toBeGreaterThanOrEqual(grace + settleMs + 5000);
    }
  });

  test("deploy/.env.example defines every variable the file requires, with unusable placeholders", () => {
    const defined = new Map([...envExample.matchAll(/^([A-Z_][A-Z0-9_]*)=(.*)$/gm)].map((m) => [m[1]!, m[2]!]));
    const required = new Set([...composeText.matchAll(/\$\{([A-Z_][A-Z0-9_]*)(?::?\?[^}]*)?\}/g)].map((m) => m[1]!));
    expect([...required].sort()).toEqual(["JWT_SECRET", "POSTGRES_PASSWORD", "PUBLIC_URL", "SECRETS_KEY", "UPSTREAM_API_KEY"]);
    for (const name of required) expect(defined.has(name)).toBe(true);
    // The JWT and secrets-key placeholders are refused by the config, so a copied example cannot serve.
    expect(() => loadConfig({ JWT_SECRET: defined.get("JWT_SECRET") })).toThrow(ConfigError);
    expect(() => loadConfig({ SECRETS_KEY: defined.get("SECRETS_KEY") })).toThrow(ConfigError);
    expect(() => loadConfig({ PUBLIC_URL: defined.get("PUBLIC_URL") })).toThrow(ConfigError);
    // The password lands in a URL unescaped.
    expect(defined.get("POSTGRES_PASSWORD")).toMatch(/^[A-Za-z0-9._~-]+$/);
  });
});
