import {
  fundingStateHash,
  newFundingState,
  type FundingFlow,
  type FundingFlowRepository,
  type NewFundingFlow,
  type StoredFlowVerifier,
} from "../funding-flows";
import { num, type PostgresDatabase } from "./database";
import { sealedContext, type SecretBox } from "../../secrets/secret-box";
import { sealFenced } from "../key-fence";
import { postgresKeyCheck } from "./settings";

type Row = Record<string, unknown>;

export class PostgresFundingFlowRepository implements FundingFlowRepository {
  constructor(
    private readonly db: PostgresDatabase,
    private readonly secrets: SecretBox,
  ) {}

  async create(flow: NewFundingFlow, now: number, lifetimeMs: number): Promise<string> {
    const state = newFundingState();
    const stateHash = fundingStateHash(state);
    await this.db.run((sql) =>
      sql.begin(async (tx) => {
        const verifier = sealFenced(this.secrets, await postgresKeyCheck(tx), flow.codeVerifier, sealedContext.fundingFlowVerifier(stateHash));
        await tx`INSERT INTO funding_flows (state_hash, app_id, app_user_id, session_id, code_verifier, monthly_cap_nano, created_at, expires_at)
          VALUES (${stateHash}, ${flow.appId}, ${flow.appUserId}, ${flow.sessionId}, ${verifier}, ${flow.monthlyCapNano}, ${now}, ${now + lifetimeMs})`;
      }),
    );
    return state;
  }

  /** One DELETE … RETURNING: of two takes of one state, on any instances, only one gets the row. */
  async take(state: string, sessionId: string, now: number): Promise<FundingFlow | null> {
    const [row]: Row[] = await this.db.run((sql) => sql`DELETE FROM funding_flows WHERE state_hash = ${fundingStateHash(state)} RETURNING *`);
    if (!row || num(row.expires_at) <= now || row.session_id !== sessionId) return null;
    return {
      appId: String(row.app_id),
      appUserId: String(row.app_user_id),
      sessionId: String(row.session_id),
      codeVerifier: this.secrets.open(String(row.code_verifier), sealedContext.fundingFlowVerifier(String(row.state_hash))),
      monthlyCapNano: num(row.monthly_cap_nano),
      createdAt: num(row.created_at),
      expiresAt: num(row.expires_at),
    };
  }

  /** SKIP LOCKED: instances purging at once share the work, and a row being taken is left alone. */
  async purgeExpired(cutoff: number, limit: number): Promise<number> {
    const rows = await this.db.run(
      (sql) => sql`DELETE FROM funding_flows WHERE state_hash IN (
          SELECT state_hash FROM funding_flows WHERE expires_at <= ${cutoff} LIMIT ${limit} FOR UPDATE SKIP LOCKED)
        RETURNING 1`,
    );
    return rows.length;
  }

  async storedVerifiers(): Promise<StoredFlowVerifier[]> {
    const rows: Row[] = await this.db.run((sql) => sql`SELECT state_hash, code_verifier FROM funding_flows ORDER BY state_hash`);
    return rows.map((r) => ({ stateHash: String(r.state_hash), stored: String(r.code_verifier) }));
  }

  async replaceStoredVerifier(stateHash: string, expected: string, replacement: string): Promise<boolean> {
    const rows = await this.db.run(
      (sql) => sql`UPDATE funding_flows SET code_verifier = ${replacement} WHERE state_hash = ${stateHash} AND code_verifier = ${expected} RETURNING 1`,
    );
    return rows.length === 1;
  }

  async forget(stateHash: string, expected: string): Promise<boolean> {
    const rows = await this.db.run((sql) => sql`DELETE FROM funding_flows WHERE state_hash = ${stateHash} AND code_verifier = ${expected} RETURNING 1`);
    return rows.length === 1;
  }
}
