import type { JournalEntry } from "../../src/store/call-journal";

/** A journal entry of app1's alice in 2026-01, as the journal's contract tests open them; `over` changes any field. */
export const journalEntry = (requestId: string, owner: string, over: Partial<JournalEntry> = {}): JournalEntry => ({
  requestId,
  owner,
  account: "u/app1/2026-01/alice",
  ceilingReservationId: null,
  ceilingReservedNano: null,
  ceilingCapNano: null,
  appId: "app1",
  appUserId: "alice",
  grantId: null,
  payer: "app",
  period: "2026-01",
  model: "openai/gpt-4o-mini",
  streamed: true,
  startedAt: 1_000,
  reservedNano: 9_000,
  capNano: 1_000_000,
  generationId: null,
  reconcileReason: null,
  attempts: 0,
  ...over,
});
