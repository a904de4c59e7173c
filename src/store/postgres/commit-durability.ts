import type { Logger } from "../../logger";
import type { PostgresDatabase } from "./database";

/**
 * Says so at start when the server's commits do not wait for their WAL
 * (`synchronous_commit = off` in its configuration): the service leaves reservations, journal
 * entries and ledger rows to the server's own durability (PostgreSQL migration 22), so with it
 * off a PostgreSQL crash can lose calls that already went upstream, and the cap no longer holds
 * through one (ARCHITECTURE.md §3 "The hard cap"). Best effort: a database not up yet is
 * reported by the store's own checks.
 */
export async function warnIfCommitsNotDurable(database: PostgresDatabase, logger: Logger): Promise<void> {
  try {
    const [row] = await database.run((sql) => sql`SELECT current_setting('synchronous_commit') AS value`);
    const value = String((row as { value: string }).value);
    if (value === "off")
      logger.warn("PostgreSQL's synchronous_commit is off: a crash of the database can lose reservations of calls already sent upstream; set it to on", {
        synchronousCommit: value,
      });
  } catch (err) {
    logger.debug("could not read PostgreSQL's synchronous_commit", { error: String(err) });
  }
}
