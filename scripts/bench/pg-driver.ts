/**
 * Which Postgres driver for the store: Bun's built-in Bun.SQL or the `postgres` package.
 * Starts its own durable (fsync on) test cluster and measures what the store will do most:
 * primary-key reads under concurrency, batched ledger inserts, LISTEN/NOTIFY, and what a
 * pool does when a transaction never ends. Each measurement runs twice, drivers alternating.
 *
 *   ./node_modules/.bin/bun scripts/bench/pg-driver.ts
 */
import postgres from "postgres";
import { startPostgres } from "../../tests/helpers/postgres";

const COMMAND = "./node_modules/.bin/bun scripts/bench/pg-driver.ts";
const ROWS = 200_000;
const BATCH = 1_000;
// A hung run must not outlive its budget; exiting runs the helper's exit hook, which kills Postgres.
setTimeout(() => {
  console.error("pg-driver: over the 110 s budget, giving up");
  process.exit(2);
}, 110_000).unref();

/** The few calls the measurements need, so both drivers run the same code. */
interface Client {
  query(text: TemplateStringsArray, ...values: unknown[]): Promise<Record<string, unknown>[]> & { cancel(): unknown };
  insert(rows: Record<string, unknown>[]): Promise<unknown>;
  copy(chunks: string[]): Promise<unknown>;
  listen?: (channel: string, onPayload: (payload: string) => void) => Promise<{ unlisten(): Promise<unknown> }>;
  /** Opens a transaction that stays open until `until` settles. */
  hold(until: Promise<void>): Promise<unknown>;
  reserveWithin?: (ms: number) => Promise<unknown>;
  close(): Promise<unknown>;
}
interface Driver {
  name: string;
  open(url: string, max: number, connectTimeoutSeconds?: number): Client;
}

const bunSql: Driver = {
  name: "Bun.SQL",
  open(url, max, connectTimeoutSeconds = 30) {
    const sql = new Bun.SQL(url, { max, connectionTimeout: connectTimeoutSeconds });
    return {
      query: (text, ...values) => sql(text, ...values),
      insert: (rows) => sql.begin((tx) => tx`insert into ledger ${tx(rows)} on conflict do nothing`),
      async copy(chunks) {
        const query = sql`copy ledger from stdin`;
        const writer = query.writable().getWriter();
        for (const chunk of chunks) await writer.write(chunk);
        await writer.close();
        return query;
      },
      listen: typeof sql.listen === "function" ? (channel, onPayload) => sql.listen(channel, onPayload) : undefined,
      hold: (until) =>
        sql.begin(async (tx) => {
          await tx`select 1`;
          await until;
        }),
      reserveWithin: (ms) => sql.reserve({ signal: AbortSignal.timeout(ms) }),
      close: () => sql.close({ timeout: 0 }),
    };
  },
};

const postgresJs: Driver = {
  name: "postgres 3.4.9",
  open(url, max, connectTimeoutSeconds = 30) {
    const sql = postgres(url, { max, connect_timeout: connectTimeoutSeconds, onnotice: () => {} });
    return {
      query: (text, ...values) => sql(text, ...(values as never[])) as never,
      insert: (rows) => sql.begin((tx) => tx`insert into ledger ${tx(rows as never)} on conflict do nothing`),
      async copy(chunks) {
        const stream = await sql`copy ledger from stdin`.writable();
        for (const chunk of chunks) if (!stream.write(chunk)) await new Promise((r) => stream.once("drain", r));
        await new Promise<void>((resolve, reject) => stream.end((err?: Error | null) => (err ? reject(err) : resolve())));
      },
      listen: (channel, onPayload) => sql.listen(channel, onPayload),
      hold: (until) =>
        sql.begin(async (tx) => {
          await tx`select 1`;
          await until;
        }),
      close: () => sql.end({ timeout: 0 }),
    };
  },
};

/** 16 columns, shaped like a usage-ledger entry: ids and labels as text, money and times as bigint. */
function ledgerRow(i: number) {
  return {
    id: `req_${i.toString(36).padStart(8, "0")}`,
    key_id: `key_${i % 500}`,
    app_id: `app_${i % 20}`,
    user_id: `user_${i % 5000}`,
    model: "openai/gpt-4o-mini",
    provider: "openai",
    status: i % 50 === 0 ? "failed" : "settled",
    currency: "usd",
    created_ms: 1_760_000_000_000 + i,
    settled_ms: 1_760_000_000_500 + i,
    prompt_tokens: 100 + (i % 900),
    completion_tokens: 20 + (i % 300),
    cached_tokens: i % 64,
    cost_micros: 1_000 + i * 3,
    reserved_micros: 5_000 + i * 3,
    attempt: 1 + (i % 3),
  };
}
const LEDGER_DDL = `create table ledger (id text primary key, key_id text not null, app_id text not null, user_id text not null,
  model text not null, provider text not null, status text not null, currency text not null, created_ms bigint not null,
  settled_ms bigint, prompt_tokens int not null, completion_tokens int not null, cached_tokens int not null,
  cost_micros bigint not null, reserved_micros bigint not null, attempt int not null)`;

async function selects(client: Client): Promise<string> {
  const until = performance.now() + 3_000;
  let done = 0;
  await Promise.all(
    Array.from({ length: 64 }, async () => {
      while (performance.now() < until) {
        await client.query`select id, v from kv where id = ${1 + Math.floor(Math.random() * 10_000)}`;
        done++;
      }
    }),
  );
  return `${Math.round(done / 3).toLocaleString("en-US")}/s`;
}

async function timedRows(admin: postgres.Sql, work: () => Promise<void>): Promise<string> {
  await admin`truncate ledger`;
  const t0 = performance.now();
  await work();
  const seconds = (performance.now() - t0) / 1000;
  const [counted] = await admin`select count(*)::int as n from ledger`;
  const n = counted?.n;
  if (n !== ROWS) throw new Error(`expected ${ROWS} rows, found ${n}`);
  return `${Math.round(ROWS / seconds).toLocaleString("en-US")}/s`;
}

async function listenCheck(client: Client): Promise<string> {
  if (!client.listen) return "no sql.listen";
  let delivered: (payload: string) => void = () => {};
  const arrived = new Promise<string>((resolve) => (delivered = resolve));
  const subscription = await client.listen("bench_channel", (payload) => delivered(payload));
  const t0 = performance.now();
  await client.query`select pg_notify('bench_channel', 'ping')`;
  const payload = await Promise.race([arrived, Bun.sleep(1_000).then(() => null)]);
  await subscription.unlisten();
  return payload === "ping" ? `delivered in ${(performance.now() - t0).toFixed(1)} ms` : "not delivered within 1 s";
}

/** A pool of one, taken by a transaction that never ends: what does the next query do? */
async function exhaustion(driver: Driver, url: string): Promise<string[]> {
  // connectTimeout 1 s, to see whether it also bounds the wait for a pooled connection.
  const client = driver.open(url, 1, 1);
  let release = () => {};
  const held = client.hold(new Promise<void>((r) => (release = r)));
  await Bun.sleep(200);
  const settle = (p: Promise<unknown>, ms: number) =>
    Promise.race([
      // DOMException's numeric `code` says little; its name (TimeoutError) says more.
      p.then(
        () => "answered",
        (e: { code?: unknown; name: string }) => `rejected (${typeof e.code === "string" ? e.code : e.name})`,
      ),
      Bun.sleep(ms).then(() => `still waiting after ${ms / 1000} s`),
    ]);
  const waiting = client.query`select 1 as x`;
  const findings = [`plain query: ${await settle(waiting, 2_500)}`];
  const cancelled = client.query`select 2 as x`;
  const t0 = performance.now();
  setTimeout(() => cancelled.cancel(), 300);
  findings.push(`query.cancel() after 300 ms: ${await settle(cancelled, 2_000)} at ${Math.round(performance.now() - t0)} ms`);
  if (client.reserveWithin) findings.push(`reserve({ signal: AbortSignal.timeout(300) }): ${await settle(client.reserveWithin(300), 2_000)}`);
  release();
  await held;
  findings.push(`after the transaction ends, the waiting query: ${await settle(waiting, 2_000)}`);
  await client.close();
  return findings;
}

const pg = await startPostgres({ fsync: true });
try {
  const url = await pg.createDatabase("bench");
  const admin = postgres(url, { max: 1, onnotice: () => {} });
  await admin`create table kv (id int primary key, v text not null)`;
  await admin`insert into kv select g, md5(g::text) from generate_series(1, 10000) g`;
  await admin.unsafe(LEDGER_DDL);
  const rows = Array.from({ length: ROWS }, (_, i) => ledgerRow(i));
  const batches = Array.from({ length: ROWS / BATCH }, (_, b) => rows.slice(b * BATCH, (b + 1) * BATCH));
  const copyChunks = batches.map((batch) => batch.map((r) => Object.values(r).join("\t") + "\n").join(""));

  const results: Record<string, Record<string, string[]>> = {};
  const record = (measure: string, driver: string, value: string) => {
    const byDriver = results[measure] ?? {};
    results[measure] = byDriver;
    const values = byDriver[driver] ?? [];
    byDriver[driver] = values;
    values.push(value);
  };
  const types: string[] = [];
  for (const order of [
    [bunSql, postgresJs],
    [postgresJs, bunSql],
  ]) {
    for (const driver of order) {
      const client = driver.open(url, 10);
      record("PK select, 64 callers, pool 10, 3 s", driver.name, await selects(client));
      record(
        `insert ${ROWS / 1000}k rows, 1000/txn, ON CONFLICT`,
        driver.name,
        await timedRows(admin, async () => {
          for (const batch of batches) await client.insert(batch);
        }),
      );
      record(`COPY ${ROWS / 1000}k rows, one stream`, driver.name, await timedRows(admin, () => client.copy(copyChunks).then(() => {})));
      record("LISTEN/NOTIFY", driver.name, await listenCheck(client));
      if (order[0] === bunSql) {
        const [row] = await client.query`select 9007199254740993::bigint as big, 42::bigint as small, 7::int as i, 1.5::numeric as n`;
        types.push(
          `${driver.name}: ${Object.entries(row!)
            .map(([k, v]) => `${k}=${typeof v} ${String(v)}`)
            .join(", ")}`,
        );
      }
      await client.close();
    }
  }
  await admin.end();

  console.log(`\n${COMMAND}   (PostgreSQL ${pg.port}, fsync on; runs 1 and 2, drivers alternating order)\n`);
  console.log(`| measurement | ${bunSql.name} | ${postgresJs.name} |`);
  console.log("| --- | ---: | ---: |");
  for (const [measure, byDriver] of Object.entries(results)) {
    console.log(`| ${measure} | ${byDriver[bunSql.name]!.join(" · ")} | ${byDriver[postgresJs.name]!.join(" · ")} |`);
  }
  console.log("\nint8/int4/numeric as returned, default options:");
  for (const line of types) console.log(`  ${line}`);
  for (const driver of [bunSql, postgresJs]) {
    console.log(`\npool of 1 held by an endless transaction, ${driver.name} (connect timeout set to 1 s):`);
    for (const line of await exhaustion(driver, url)) console.log(`  ${line}`);
  }
} finally {
  await pg.destroy();
}
process.exit(0);
