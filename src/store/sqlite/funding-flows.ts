import type { Database } from "bun:sqlite";
import {
  fundingStateHash,
  newFundingState,
  type FundingFlow,
  type FundingFlowRepository,
  type NewFundingFlow,
  type StoredFlowVerifier,
} from "../funding-flows";
import { sealedContext, type SecretBox } from "../../secrets/secret-box";
import { sealFenced } from "../key-fence";
import { sqliteKeyCheck } from "./settings";
import { scrubbingWrite } from "./database";

interface FlowRow {
  state_hash: string;
  app_id: string;
  app_user_id: string;
  session_id: string;
  code_verifier: string;
  monthly_cap_nano: number;
  created_at: number;
  expires_at: number;
}

/**
 * A verifier is not scrubbed from the file when its flow is taken or purged: it lives
 * minutes, is sealed, and is worth nothing without its code, which the upstream takes once.
 * Rotation and `secrets reset` do scrub what they replace: the key it was sealed under is
 * being retired, or is lost.
 */
export class SqliteFundingFlowRepository implements FundingFlowRepository {
  constructor(
    private readonly db: Database,
    private readonly secrets: SecretBox,
  ) {}

  async create(flow: NewFundingFlow, now: number, lifetimeMs: number): Promise<string> {
    const state = newFundingState();
    const stateHash = fundingStateHash(state);
    // IMMEDIATE: the key check read and the insert commit together (src/store/key-fence.ts).
    this.db
      .transaction(() => {
        const verifier = sealFenced(this.secrets, sqliteKeyCheck(this.db), flow.codeVerifier, sealedContext.fundingFlowVerifier(stateHash));
        this.db
          .query(
            `INSERT INTO funding_flows (state_hash, app_id, app_user_id, session_id, code_verifier, monthly_cap_nano, created_at, expires_at)
             VALUES (?, ?, ?, ?, ?, ?, ?, ?)`,
          )
          .run(stateHash, flow.appId, flow.appUserId, flow.sessionId, verifier, flow.monthlyCapNano, now, now + lifetimeMs);
      })
      .immediate();
    return state;
  }

  /** One DELETE … RETURNING: two takes of one state, in this process or another, cannot both get the row. */
  async take(state: string, sessionId: string, now: number): Promise<FundingFlow | null> {
    const row = this.db.query<FlowRow, [string]>("DELETE FROM funding_flows WHERE state_hash = ? RETURNING *").get(fundingStateHash(state));
    if (!row || row.expires_at <= now || row.session_id !== sessionId) return null;
    return {
      appId: row.app_id,
      appUserId: row.app_user_id,
      sessionId: row.session_id,
      codeVerifier: this.secrets.open(row.code_verifier, sealedContext.fundingFlowVerifier(row.state_hash)),
      monthlyCapNano: row.monthly_cap_nano,
      createdAt: row.created_at,
      expiresAt: row.expires_at,
    };
  }

  async purgeExpired(cutoff: number, limit: number): Promise<number> {
    return this.db
      .query("DELETE FROM funding_flows WHERE state_hash IN (SELECT state_hash FROM funding_flows WHERE expires_at <= ? LIMIT ?)")
      .run(cutoff, limit).changes;
  }

  async storedVerifiers(): Promise<StoredFlowVerifier[]> {
    return this.db
      .query<{ state_hash: string; code_verifier: string }, []>("SELECT state_hash, code_verifier FROM funding_flows ORDER BY state_hash")
      .all()
      .map((r) => ({ stateHash: r.state_hash, stored: r.code_verifier }));
  }

  async replaceStoredVerifier(stateHash: string, expected: string, replacement: string): Promise<boolean> {
    const update = this.db.query("UPDATE funding_flows SET code_verifier = ? WHERE state_hash = ? AND code_verifier = ?");
    return scrubbingWrite(this.db, () => update.run(replacement, stateHash, expected).changes === 1);
  }

  async forget(stateHash: string, expected: string): Promise<boolean> {
    const remove = this.db.query("DELETE FROM funding_flows WHERE state_hash = ? AND code_verifier = ?");
    return scrubbingWrite(this.db, () => remove.run(stateHash, expected).changes === 1);
  }
}
