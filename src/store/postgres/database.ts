import { SQL, type ReservedSQL } from "bun";
import { ApiError } from "../../errors";

export interface PostgresOptions {
  /** Connections in this process's pool. */
  poolSize?: number;
  /** Longest wait for a pooled connection, and longest statement, in milliseconds. */
  statementTimeoutMs?: number;
}

/**
 * The pool, with two bounds so that a stuck or abandoned connection cannot leak:
 * - acquiring waits at most `statementTimeoutMs` (a full pool answers 503 `unavailable`
 *   instead of queueing without end: neither driver has an acquire timeout of its own,
 *   measured in scripts/bench/pg-driver.ts), and a connection is always given back;
 * - the server cancels a statement that runs longer than that, and ends a session left
 *   idle inside a transaction.
 * JIT compilation is off for these sessions: every statement here is a short one, and the
 * planner's cost estimate (which decides JIT) follows the dead rows of the call journal, a
 * table that churns with every call, so the reconciler's claim was compiled again each
 * second: 12–22 ms of the server's CPU, and 0.4 s once a backlog had left many dead
 * entries (ARCHITECTURE.md §7 "No JIT on PostgreSQL").
 * Driver: Bun's built-in SQL client, picked on measurement (ARCHITECTURE.md §7 "PostgreSQL
 * driver"): about 1.7 times the primary-key reads per second of the `postgres` package, and
 * it has LISTEN.
 */
export class PostgresDatabase {
  readonly sql: SQL;
  private readonly timeoutMs: number;

  constructor(url: string, options: PostgresOptions = {}) {
    this.timeoutMs = options.statementTimeoutMs ?? 5000;
    this.sql = new SQL(url, {
      max: options.poolSize ?? 10,
      connectionTimeout: Math.ceil(this.timeoutMs / 1000),
      idleTimeout: 60,
      maxLifetime: 30 * 60,
      connection: {
        statement_timeout: this.timeoutMs,
        idle_in_transaction_session_timeout: this.timeoutMs * 2,
        jit: "off",
        application_name: "metered-proxy",
      },
    });
  }

  /** Runs `work` on one pooled connection, acquired within the deadline. */
  async run<T>(work: (sql: ReservedSQL) => Promise<T>): Promise<T> {
    let conn: ReservedSQL;
    try {
      conn = await this.sql.reserve({ signal: AbortSignal.timeout(this.timeoutMs) });
    } catch (err) {
      throw unavailable(err);
    }
    try {
      return await work(conn);
    } catch (err) {
      throw isConnectionFailure(err) ? unavailable(err) : err;
    } finally {
      conn.release();
    }
  }

  async close(): Promise<void> {
    await this.sql.close({ timeout: 5 });
  }
}

/** Budgets fail closed: a database that cannot be reached is 503, never a free pass. */
function unavailable(err: unknown): ApiError {
  const detail = err instanceof Error ? err.message : String(err);
  return new ApiError("unavailable", `the database is unavailable (${detail}); no request is admitted without it`);
}

/**
 * Failures of the database rather than of the statement: the driver could not connect or
 * lost the connection, or the server said so (SQLSTATE class 08 connection exception, 53
 * insufficient resources, 57P01–57P03 shutting down or starting, 57014 statement timeout).
 */
function isConnectionFailure(err: unknown): boolean {
  const { code = "", errno = "" } = (err ?? {}) as { code?: string; errno?: string | number };
  if (/^ERR_POSTGRES_(CONNECTION|SOCKET|IDLE|LIFETIME|TLS|NOT_CONNECTED)/.test(code) || code === "ECONNREFUSED" || code === "ECONNRESET") return true;
  const state = String(errno);
  return /^(08|53)/.test(state) || /^57P0[123]$/.test(state) || state === "57014";
}

/** int8 columns arrive as strings (no precision lost); amounts and times fit a double exactly. */
export const num = (v: unknown): number => (v === null || v === undefined ? 0 : Number(v));
export const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));
/** bytea columns arrive as Buffers. */
export const bytes = (v: unknown): Uint8Array => (v instanceof Uint8Array ? v : new Uint8Array(v as ArrayBuffer));
