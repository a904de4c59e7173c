/**
 * One delivery attempt: resolve the receiver's host, refuse it if any address is not public
 * (src/webhooks/special-addresses.ts), then POST to a checked address, all within one
 * deadline (`WEBHOOK_TIMEOUT_MS`). The outcome is a status or a coarse failure class; the
 * operating system's and the receiver's own words go no further than the log's `cause`.
 *
 * DNS rebinding (a name that answers a public address to the check and a private one to the
 * connection a moment later) is closed, not merely narrowed: the request goes to the address
 * that was checked, not to the name, so there is no second lookup to win. The URL's host
 * becomes that address; the `Host` header keeps the name, and for https the TLS server name
 * (SNI) and the certificate check use the name too, so the receiver sees the request it was
 * registered for. Redirects are not followed, so no answer can point the request elsewhere.
 * What remains: an address that is public yet reaches the operator's own services (its own
 * public address space, or its public address looped back by its router) passes the check;
 * only the operator's network rules can refuse those.
 */
import { lookup } from "node:dns/promises";
import type { AttemptFailure } from "../store/webhooks";
import { firstNonPublic, isIpLiteral, type SpecialRange } from "./special-addresses";
import { errorCode, isConnectFailure } from "../connect-failure";

/** Bun's fetch, or a stand-in for it in tests; `tls.serverName` is Bun's fetch option for SNI and the certificate check. */
export type SendWebhook = (url: string, init: RequestInit & { tls?: { serverName?: string } }) => Promise<Response>;

export interface AttemptRequest {
  url: string;
  headers: Record<string, string>;
  body: string;
}

export interface AttemptPolicy {
  timeoutMs: number;
  /** Local development only: send to private, loopback and other non-public addresses too. */
  allowPrivateAddresses: boolean;
}

export type AttemptResult =
  | { answered: true; status: number }
  /** `cause`: an error code or the refused range, for the operator's log only. */
  | { answered: false; failure: AttemptFailure; cause: string };

export class AddressRefusedError extends Error {
  constructor(
    readonly address: string,
    readonly range: SpecialRange,
  ) {
    super(`${address} is a ${range} address`);
    this.name = "AddressRefusedError";
  }
}

export async function attemptDelivery(request: AttemptRequest, policy: AttemptPolicy, send: SendWebhook): Promise<AttemptResult> {
  const deadline = AbortSignal.timeout(policy.timeoutMs);
  let url: URL;
  let host: string;
  let addresses: string[];
  try {
    url = new URL(request.url);
    host = url.hostname.replace(/^\[(.*)\]$/, "$1");
    addresses = await withDeadline(checkedAddresses(host, policy.allowPrivateAddresses), deadline);
  } catch (err) {
    return failed(err);
  }
  for (const [index, address] of addresses.entries()) {
    try {
      const response = await send(pinned(url, address), {
        method: "POST",
        body: request.body,
        headers: { ...request.headers, host: url.host },
        // A receiver that redirects is misconfigured: following could send the event elsewhere.
        redirect: "manual",
        signal: deadline,
        ...(url.protocol === "https:" && !isIpLiteral(host) ? { tls: { serverName: host.replace(/\.$/, "") } } : {}),
      });
      await response.body?.cancel().catch(() => {});
      return { answered: true, status: response.status };
    } catch (err) {
      const lastAddress = index === addresses.length - 1;
      // A connection never made: another address of the host may still answer.
      if (lastAddress || !isConnectFailure(err)) return failed(err);
    }
  }
  return { answered: false, failure: "unreachable", cause: "no address" };
}

/**
 * Every address the host resolves to, refused as a whole if ANY is not public: the
 * connection could go to any of them. `lookup` is what the system's resolver (and so any
 * connection) would use, hosts file included.
 */
async function checkedAddresses(host: string, allowPrivate: boolean): Promise<string[]> {
  const addresses = isIpLiteral(host) ? [host] : [...new Set((await lookup(host, { all: true })).map((a) => a.address))];
  const refused = allowPrivate ? null : firstNonPublic(addresses);
  if (refused) throw new AddressRefusedError(refused.address, refused.range);
  return addresses;
}

/** The URL with its host replaced by `address` (port, path and query kept). */
function pinned(url: URL, address: string): string {
  const target = new URL(url);
  target.hostname = address.includes(":") ? `[${address}]` : address;
  return target.href;
}

function failed(err: unknown): AttemptResult {
  if (err instanceof AddressRefusedError) return { answered: false, failure: "address_refused", cause: err.message };
  const name = (err as Error | undefined)?.name;
  if (name === "TimeoutError" || name === "AbortError") return { answered: false, failure: "timeout", cause: name };
  // Refused, reset, DNS failure, TLS failure, anything else on the way: all one class.
  return { answered: false, failure: "unreachable", cause: errorCode(err) || "unknown" };
}

/** `work`, or the deadline's reason if it passes first (a DNS lookup takes no signal). */
function withDeadline<T>(work: Promise<T>, deadline: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(deadline.reason as Error);
    if (deadline.aborted) return onAbort();
    deadline.addEventListener("abort", onAbort, { once: true });
    work.then(resolve, reject).finally(() => deadline.removeEventListener("abort", onAbort));
  });
}
