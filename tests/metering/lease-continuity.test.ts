/**
 * When a reconciler may take another owner's journal entries as a dead one's
 * (src/metering/lease-continuity.ts): at once while this process's lease has never failed,
 * and after a failure only once its renewals have held for ORPHANS_AFTER_MS again.
 */
import { expect, test } from "bun:test";
import { LeaseContinuity, ORPHANS_AFTER_MS } from "../../src/metering/lease-continuity";

test("an unbroken lease takes others' entries; after a failed renewal, only once renewals held again for a while", () => {
  let now = 1_000;
  const lease = new LeaseContinuity(() => now);
  expect(lease.mayTakeOthers()).toBe(true);
  lease.renewed(true);
  expect(lease.mayTakeOthers()).toBe(true);
  lease.renewed(false);
  expect(lease.mayTakeOthers()).toBe(false);
  now += 60_000;
  expect(lease.mayTakeOthers()).toBe(false);
  lease.renewed(true);
  now += ORPHANS_AFTER_MS - 1;
  lease.renewed(true);
  expect(lease.mayTakeOthers()).toBe(false);
  now += 1;
  expect(lease.mayTakeOthers()).toBe(true);
  lease.renewed(false);
  lease.renewed(true);
  expect(lease.mayTakeOthers()).toBe(false);
});
