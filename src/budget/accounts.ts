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
