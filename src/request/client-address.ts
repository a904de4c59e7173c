/**
 * Who a request comes from, for the limits that count per client (consent pages and their
 * approvals, wrong admin tokens). Without TRUSTED_PROXY it is the connection's peer, and
 * `X-Forwarded-For` is ignored: anyone can write that header. Behind a reverse proxy every
 * peer is the proxy, so all clients would share one count (a few strangers would use up
 * everyone's); with the proxy's addresses in TRUSTED_PROXY, a request whose peer is one of
 * them is counted by the address the proxies forwarded: `X-Forwarded-For` read from the
 * right, skipping the trusted proxies, the first address that is not one of them (each
 * proxy appends the address it received from, so only the entries they added are to be
 * believed; whatever the client itself sent is further left).
 */
import { BlockList, isIP } from "node:net";

export class ClientAddresses {
  private readonly trusted = new BlockList();
  private readonly anyTrusted: boolean;

  /** `trustedProxies`: TRUSTED_PROXY's entries, each an address or a CIDR range (checked by src/config.ts). */
  constructor(trustedProxies: readonly string[] = []) {
    for (const entry of trustedProxies) {
      const [address = "", prefix] = entry.split("/");
      const type = isIP(address) === 4 ? "ipv4" : "ipv6";
      if (prefix === undefined) this.trusted.addAddress(address, type);
      else this.trusted.addSubnet(address, Number(prefix), type);
    }
    this.anyTrusted = trustedProxies.length > 0;
  }

  /** The client's address: `peer` (the connection's; undefined where there is none, e.g. app.handle), or the forwarded one behind a trusted proxy. */
  of(peer: string | undefined, headers: Headers): string {
    if (peer === undefined) return "unknown";
    if (!this.anyTrusted || !this.isTrusted(peer)) return peer;
    const forwarded = headers.get("x-forwarded-for");
    if (forwarded === null) return peer;
    let client = peer;
    for (const entry of forwarded.split(",").reverse()) {
      const address = bareAddress(entry.trim());
      // A malformed entry breaks the chain: the last address a trusted proxy vouched for stands.
      if (address === null) return client;
      client = address;
      if (!this.isTrusted(address)) return client;
    }
    return client;
  }

  private isTrusted(address: string): boolean {
    const family = isIP(address);
    return family !== 0 && this.trusted.check(address, family === 4 ? "ipv4" : "ipv6");
  }
}

/**
 * What a per-client limit counts by: the address, but an IPv6 address by its /64, which is
 * what one subscriber or host is given (RFC 6177), so one client cannot step past its limit
 * by taking a new address of its own prefix. IPv4-mapped addresses count as their IPv4.
 */
export function clientKey(address: string): string {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address);
  if (mapped) return mapped[1]!;
  if (isIP(address) !== 6) return address;
  const groups = expandIpv6(address);
  return `${groups.slice(0, 4).join(":")}::/64`;
}

/** An entry of X-Forwarded-For as an address (a port or brackets some proxies add are dropped), or null. */
function bareAddress(entry: string): string | null {
  const bracketed = /^\[([^\]]+)\](?::\d+)?$/.exec(entry);
  const candidate = bracketed ? bracketed[1]! : /^\d+\.\d+\.\d+\.\d+:\d+$/.test(entry) ? entry.slice(0, entry.lastIndexOf(":")) : entry;
  return isIP(candidate) === 0 ? null : candidate;
}

/** The eight groups of an IPv6 address, without leading zeros (an embedded IPv4 tail as two groups). */
function expandIpv6(address: string): string[] {
  let text = address.toLowerCase().replace(/%.*$/, "");
  const v4 = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (v4) {
    const [a, b, c, d] = v4.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, v4.index)}${((a << 8) | b).toString(16)}:${((c << 8) | d).toString(16)}`;
  }
  const [head = "", tail] = text.split("::");
  const left = head === "" ? [] : head.split(":");
  const right = tail === undefined || tail === "" ? [] : tail.split(":");
  const middle = tail === undefined ? [] : Array<string>(8 - left.length - right.length).fill("0");
  return [...left, ...middle, ...right].map((g) => parseInt(g, 16).toString(16));
}
