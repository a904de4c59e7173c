/**
 * A stand-in for the store behind the Redis budget ledger's rebuilds (src/store/redis/counters-epoch.ts
 * TruthSource), for tests of the ledger alone: settled spend and freezes per account, the call
 * journal's holds, and the record that shared counters have served it. Tests write to it as
 * the usage writer and the journal would.
 */
import type { JournaledHold } from "../../src/budget/truth";
import type { TruthSource } from "../../src/store/redis/counters-epoch";

export interface FakeTruth extends TruthSource {
  /** Settled spend per account (the ledger rows' totals). */
  spent: Map<string, number>;
  frozen: Map<string, number>;
  /** Journaled holds by request id, with their account. */
  journal: Map<string, JournaledHold & { account: string }>;
  /** Every account a rebuild read. */
  loads: string[];
  /** As the usage writer does: the row's cost joins the totals and its journal entry ends, in one step. */
  writeRow(account: string, requestId: string, costNano: number): void;
  /** As the journal does before a call goes upstream. */
  journalCall(account: string, requestId: string, amountNano: number, owner?: string, capNano?: number): void;
}

export function fakeTruth({
  spent = new Map(),
  frozen = new Map(),
  loads = [],
}: { spent?: Map<string, number>; frozen?: Map<string, number>; loads?: string[] } = {}): FakeTruth {
  const journal = new Map<string, JournaledHold & { account: string }>();
  let epochs = 0;
  return {
    spent,
    frozen,
    journal,
    loads,
    load: async (account) => {
      loads.push(account);
      const holds = [...journal.values()].filter((h) => h.account === account).map(({ account: _, ...hold }) => hold);
      return { spentNano: spent.get(account) ?? 0, frozenCapNano: frozen.get(account) ?? null, holds };
    },
    claimFirstEpoch: async () => epochs++ === 0,
    writeRow(account, requestId, costNano) {
      spent.set(account, (spent.get(account) ?? 0) + costNano);
      journal.delete(requestId);
    },
    journalCall(account, requestId, amountNano, owner = "someone", capNano = Number.MAX_SAFE_INTEGER) {
      journal.set(requestId, { account, requestId, amountNano, capNano, owner });
    },
  };
}
