import type { Period } from "../money";
import type { BudgetAccount } from "./accounts";

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
  /** Called when the upstream refuses payment; the user must re-approve. */
  markFundingInvalid(): Promise<void>;
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
