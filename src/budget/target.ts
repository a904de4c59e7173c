import type { Period } from "../money";
import type { BudgetAccount } from "./accounts";

/**
 * Whose upstream key pays a call: the operator's (UPSTREAM_API_KEY, `app`) or the user's own
 * account (`user`, linked by the upstream's OAuth PKCE flow). It decides what an upstream
 * refusal of the key means: the operator's problem (502 `upstream`, no user marked) or the
 * user's (402 `funding_invalid`, the connection marked). A connection's funding source decides it.
 */
export type UpstreamPayer = "app" | "user";

/** The budget a chat request draws on: a user's monthly cap, or a grant's cap (with its app's daily ceiling). */
export interface BudgetTarget {
  account: BudgetAccount;
  capNano: number;
  appId: string;
  appUserId: string | null;
  grantId: string | null;
  period: Period;
  /** When the budget renews: the period's end for monthly caps. */
  resetsAt: string;
  /** Whose upstream key pays the call. */
  payer: UpstreamPayer;
  /** Called when the upstream refuses the user's own key (payer `user` only); the user must reconnect. */
  markFundingInvalid(): Promise<void>;
  /**
   * Payer `user` only: opens the user's own upstream key from the store for the one call it
   * pays (never cached, never logged); null when no key is linked any more.
   */
  openUserKey?(): Promise<string | null>;
  /**
   * Called once the reservation is held, before going upstream; may refuse (throw), in
   * which case the reservation is released. Grants count their uses here.
   */
  admit?(): Promise<void>;
  /**
   * Grants only: the app's daily ceiling on what its grants spend, a second cap the call
   * draws on (reserved first, on the day's account: grantDayAccount).
   */
  dailyGrantCeilingNano?: number;
}
