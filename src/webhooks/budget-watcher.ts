import type { BudgetAccount } from "../budget/accounts";
import type { BudgetLedger } from "../budget/ledger";
import type { Logger } from "../logger";
import type { Clock } from "../clock";
import { nanoToUsd } from "../money";
import type { Store } from "../store";
import { subscribed } from "../store/webhook-rows";
import type { WebhookEventDraft } from "../store/webhooks";
import { PeriodicTask } from "../periodic-task";
import type { BudgetTarget } from "../budget/target";
import { spendReached, THRESHOLD_LEVELS, thresholdEvent, type ThresholdLevel, type ThresholdReason } from "./threshold-event";

interface Watched {
  target: BudgetTarget;
  /** A call on it was refused for want of budget since the last check. */
  refused: boolean;
}

/** A refusal counts as "used up" only past this share of the cap: a huge prompt can be refused on a fresh budget. */
const REFUSAL_MEANS_EXHAUSTED_PCT = 80;

/**
 * Why `level` is reached, or null when it is not: the spend reached it (`spent`), or, for
 * 100 % only, a call was refused with the spend past 80 % (`refused`): reservations shrink
 * the last calls to what is left, so the spend of a user who can call no more usually
 * stops a little short of the cap.
 */
function thresholdReason(level: ThresholdLevel, spentNano: number, capNano: number, refused: boolean): ThresholdReason | null {
  if (spendReached(spentNano, capNano, level)) return "spent";
  if (level === 100 && refused && spendReached(spentNano, capNano, REFUSAL_MEANS_EXHAUSTED_PCT)) return "refused";
  return null;
}
const KNOWN_KEYS_BOUND = 100_000;

/**
 * Turns spend into `budget.threshold` (80 % and 100 % of a user's monthly cap) and
 * `grant.exhausted` events (ARCHITECTURE.md §6 "Webhooks"). The request path only marks an
 * account as touched (a map write); the check runs off it, on the dispatcher's poll, and
 * reads the live counters once per touched account. Each event has a dedup key (account
 * and period, or grant), so however many instances see the crossing it is recorded once.
 *
 * 100 % means "used up": spend reached the cap, or a call was refused with the spend past
 * 80 % (reservations shrink the last calls to what is left, so spend may stop just short).
 * The event says which (`reason`), and how much of the cap was spent (`usedPercent`).
 */
export class BudgetWatcher {
  private touched = new Map<BudgetAccount, Watched>();
  /** Dedup keys already recorded (or already found present): skips the store on repeats. */
  private readonly known = new Set<string>();
  private readonly checks = new PeriodicTask(() =>
    this.checkTouched().catch((err) => this.logger.warn("budget threshold check failed", { error: (err as Error).message })),
  );

  constructor(
    private readonly store: Store,
    private readonly budget: BudgetLedger,
    private readonly clock: Clock,
    private readonly logger: Logger,
  ) {}

  /** Called on the request path after a settle, and on a refusal: no I/O, and no allocation when the account is already marked. */
  note(target: BudgetTarget, refused = false): void {
    const seen = this.touched.get(target.account);
    if (seen) {
      seen.target = target;
      seen.refused ||= refused;
    } else {
      this.touched.set(target.account, { target, refused });
    }
  }

  start(pollMs: number): void {
    this.checks.start(pollMs);
  }

  stop(): Promise<void> {
    return this.checks.stop();
  }

  /** Checks every account touched since the last check; a check already running is joined. */
  check(): Promise<void> {
    return this.checks.run();
  }

  private async checkTouched(): Promise<void> {
    const batch = this.touched;
    this.touched = new Map();
    const byApp = new Map<string, Watched[]>();
    for (const watched of batch.values()) {
      const list = byApp.get(watched.target.appId);
      if (list) list.push(watched);
      else byApp.set(watched.target.appId, [watched]);
    }
    let failure: unknown = null;
    for (const [appId, list] of byApp) {
      try {
        const endpoints = await this.store.webhooks.listEndpoints(appId);
        const wantsGrants = subscribed(endpoints, "grant.exhausted").length > 0;
        const wantsThresholds = subscribed(endpoints, "budget.threshold").length > 0;
        for (const watched of list) {
          if (watched.target.grantId) {
            if (wantsGrants) await this.checkGrant(watched);
          } else if (wantsThresholds) {
            await this.checkUser(watched);
          }
        }
      } catch (err) {
        // Checked again at the next poll. An account touched again meanwhile keeps its newer
        // target, and a refusal seen by either (what "100 %" may rest on) is kept.
        for (const watched of list) {
          const newer = this.touched.get(watched.target.account);
          if (newer) newer.refused ||= watched.refused;
          else this.touched.set(watched.target.account, watched);
        }
        failure = err;
      }
    }
    if (failure) throw failure;
  }

  private async checkUser({ target, refused }: Watched): Promise<void> {
    const keys = THRESHOLD_LEVELS.map((level) => ({ level, key: `budget.threshold:${target.account}:${level}` })).filter((k) => !this.known.has(k.key));
    if (keys.length === 0) return;
    const { spentNano } = await this.budget.snapshot(target.account);
    for (const { level, key } of keys) {
      const reason = thresholdReason(level, spentNano, target.capNano, refused);
      if (reason) await this.record(thresholdEvent(target, level, reason, spentNano, key));
    }
  }

  private async checkGrant({ target, refused }: Watched): Promise<void> {
    const key = `grant.exhausted:${target.grantId}`;
    if (this.known.has(key)) return;
    const [{ spentNano }, grant] = await Promise.all([this.budget.snapshot(target.account), this.store.grants.find(target.grantId!)]);
    if (!grant) return;
    const usesUp = grant.maxUses !== null && grant.uses >= grant.maxUses;
    const budgetUp = spentNano >= grant.usdCapNano || (refused && spentNano * 100 >= grant.usdCapNano * REFUSAL_MEANS_EXHAUSTED_PCT);
    if (!usesUp && !budgetUp) return;
    await this.record({
      appId: target.appId,
      type: "grant.exhausted",
      dedupKey: key,
      data: {
        appId: target.appId,
        grantId: grant.id,
        reason: budgetUp ? "budget" : "uses",
        usdCap: nanoToUsd(grant.usdCapNano),
        usedUsd: nanoToUsd(spentNano),
        uses: grant.uses,
        maxUses: grant.maxUses,
      },
    });
  }

  private async record(draft: WebhookEventDraft & { dedupKey: string }): Promise<void> {
    await this.store.webhooks.record(draft, this.clock.now());
    if (this.known.size >= KNOWN_KEYS_BOUND) this.known.clear();
    this.known.add(draft.dedupKey);
  }
}
