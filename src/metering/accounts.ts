/**
 * Budget accounts: the unit a cap applies to. A user's monthly budget is one account per
 * app, user and period; a grant is one account for its whole life. The key is opaque
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
