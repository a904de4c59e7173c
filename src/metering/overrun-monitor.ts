import type { Logger } from "../logger";

/**
 * Counts calls whose actual cost passed their reservation. That happens only when the
 * upstream bills above the catalogue the reservation was made on (a price changed under
 * us), so it is an operator's alert: counted in /healthz, and logged once per model so a
 * mispriced model cannot flood the log.
 */
export class OverrunMonitor {
  private total = 0;
  private readonly perModel = new Map<string, number>();

  constructor(private readonly logger: Logger) {}

  record(model: string, details: { requestId: string; reservedNano: number; costNano: number }): void {
    this.total++;
    const seen = this.perModel.get(model) ?? 0;
    this.perModel.set(model, seen + 1);
    if (seen === 0) {
      this.logger.warn(
        "actual cost exceeded the reservation: the upstream billed above its catalogue; the budget is frozen until its period resets or its cap is raised",
        {
          model,
          ...details,
        },
      );
    }
  }

  get state(): { count: number; models: Record<string, number> } {
    return { count: this.total, models: Object.fromEntries(this.perModel) };
  }
}
