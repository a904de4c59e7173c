/**
 * Budget accounts: the unit a cap applies to. A user's monthly budget is one account per
 * app, user and period; a grant is one account for its whole life; what an app's grants
 * spend in one UTC day is one more (its daily ceiling), which each grant call draws on
 * beside its grant's own. The key is opaque
 * text shared by the live ledger, the usage ledger rows and the totals table.
 * The user id goes last so that any characters in it cannot make two keys collide.
 */
export type BudgetAccount = string;

export function userAccount(appId: string, periodId: string, appUserId: string): BudgetAccount {
  return `u/${appId}/${periodId}/${appUserId}`;
}

export function grantAccount(grantId: string): BudgetAccount {
  return `g/${grantId}`;
}

/** What the app's grants spend on the UTC day of `at` (ms): the account its daily grant ceiling caps. */
export function grantDayAccount(appId: string, at: number): BudgetAccount {
  return `gd/${appId}/${new Date(at).toISOString().slice(0, 10)}`;
}

/**
 * The app and UTC day (start and end, ms) of a grant-day account, or null for any other
 * account: the journal keeps a grant call's hold on its day by app and start time, not by
 * account (src/store/call-journal.ts).
 */
export function grantDayOf(account: BudgetAccount): { appId: string; start: number; end: number } | null {
  const match = /^gd\/([^/]+)\/(\d{4}-\d{2}-\d{2})$/.exec(account);
  if (!match) return null;
  const start = Date.parse(`${match[2]}T00:00:00.000Z`);
  return Number.isNaN(start) ? null : { appId: match[1]!, start, end: start + 86_400_000 };
}
