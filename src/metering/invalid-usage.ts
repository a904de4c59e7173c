import type { Logger } from "../logger";
import { UPSTREAM_USAGE_INVALID } from "../budget/usage-row";
import { reservationCharge, type Charge } from "../pricing/reservation";
import { usageProblem, type UsageAllowance } from "../pricing/usage-check";

/**
 * The meter's check of the upstream's numbers before they become a charge (src/pricing/usage-check.ts),
 * for every call it settles: each call whose upstream reported usage that cannot be true is
 * charged its reservation under the row status UPSTREAM_USAGE_INVALID, counted (`/metrics`)
 * and logged with its request id: the operator's evidence when taking the numbers up with
 * the upstream.
 */
export class InvalidUsageMonitor {
  private total = 0;

  constructor(private readonly logger: Logger) {}

  /**
   * The charge as found, or the whole reservation when the upstream's numbers behind it
   * cannot be true: such a number is neither charged nor stored, so no row holds a cost or
   * count that breaks a counter or a reader. The reservation is what the call was allowed to
   * cost; the status tells the row apart. `tokens`: the bounds the call's request set, when known.
   */
  checked(
    charge: Charge,
    status: string,
    call: { requestId: string; model: string; reservedNano: number },
    tokens?: Omit<UsageAllowance, "reservedNano">,
  ): { charge: Charge; status: string } {
    if (!charge.reported) return { charge, status };
    const problem = usageProblem(charge.reported, charge.costNano, { reservedNano: call.reservedNano, ...tokens });
    if (problem === null) return { charge, status };
    this.total++;
    this.logger.warn("the upstream reported usage that cannot be true: the call is charged its reservation", {
      requestId: call.requestId,
      model: call.model,
      problem,
      reservedNano: call.reservedNano,
    });
    return { charge: reservationCharge(call.reservedNano), status: UPSTREAM_USAGE_INVALID };
  }

  /** Calls charged so since start. */
  get count(): number {
    return this.total;
  }
}
