/**
 * Which IP addresses a webhook may not be sent to: every address that is not a public
 * unicast address on the internet. A receiver URL is chosen by whoever registers it, and a
 * delivery is a POST from inside the operator's network, so without this check an endpoint
 * could aim the service at its cloud metadata service (169.254.169.254), its database, or
 * anything else that only trusts its neighbours (server-side request forgery).
 *
 * The ranges are the IANA special-purpose address registries (RFC 6890 and its updates):
 * for IPv4 a deny list; for IPv6 everything outside 2000::/3 (global unicast, RFC 4291
 * §2.4) plus the special blocks inside it. IPv4 addresses carried in IPv6 forms that reach
 * an IPv4 host (IPv4-mapped ::ffff:0:0/96, RFC 4291 §2.5.5.2; the NAT64 prefix 64:ff9b::/96,
 * RFC 6052) are judged by the IPv4 address they carry.
 */
import { isIP } from "node:net";

export type SpecialRange =
  | "unspecified"
  | "this network"
  | "loopback"
  | "private"
  | "shared address space (CGNAT)"
  | "link-local"
  | "unique-local"
  | "site-local"
  | "multicast"
  | "broadcast"
  | "documentation"
  | "benchmarking"
  | "protocol assignments"
  | "6to4"
  | "reserved";

type Ipv4Block = [base: string, prefix: number, range: SpecialRange];

const IPV4_BLOCKS: Ipv4Block[] = [
  ["0.0.0.0", 32, "unspecified"],
  ["0.0.0.0", 8, "this network"], // RFC 791: "this host on this network"; Linux connects 0.x to itself
  ["10.0.0.0", 8, "private"], // RFC 1918
  ["100.64.0.0", 10, "shared address space (CGNAT)"], // RFC 6598
  ["127.0.0.0", 8, "loopback"], // RFC 1122
  ["169.254.0.0", 16, "link-local"], // RFC 3927; cloud metadata services live here
  ["172.16.0.0", 12, "private"], // RFC 1918
  ["192.0.0.0", 24, "protocol assignments"], // RFC 6890
  ["192.0.2.0", 24, "documentation"], // RFC 5737
  ["192.88.99.0", 24, "6to4"], // RFC 7526 (6to4 relay anycast, deprecated)
  ["192.168.0.0", 16, "private"], // RFC 1918
  ["198.18.0.0", 15, "benchmarking"], // RFC 2544
  ["198.51.100.0", 24, "documentation"], // RFC 5737
  ["203.0.113.0", 24, "documentation"], // RFC 5737
  ["224.0.0.0", 4, "multicast"], // RFC 5771
  ["255.255.255.255", 32, "broadcast"], // RFC 919
  ["240.0.0.0", 4, "reserved"], // RFC 1112
];

const ipv4Number = (text: string): number => text.split(".").reduce((n, octet) => n * 256 + Number(octet), 0);

const IPV4_MASKED = IPV4_BLOCKS.map(([base, prefix, range]) => {
  const size = 2 ** (32 - prefix);
  return { start: ipv4Number(base), size, range };
});

/**
 * The special-purpose range an IP address belongs to, or null when it is a public unicast
 * address a webhook may go to. Anything that is not an IP address at all counts as reserved.
 * Accepts IPv6 with or without brackets and with a zone (`fe80::1%eth0`).
 */
export function specialUseRange(address: string): SpecialRange | null {
  const bare = address.replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, "");
  const version = isIP(bare);
  if (version === 4) return ipv4Range(ipv4Number(bare));
  if (version === 6) return ipv6Range(ipv6Groups(bare));
  return "reserved";
}

function ipv4Range(n: number): SpecialRange | null {
  // The first block that holds it: the /32s are listed before the blocks that contain them.
  for (const block of IPV4_MASKED) if (n >= block.start && n < block.start + block.size) return block.range;
  return null;
}

function ipv6Range(g: number[]): SpecialRange | null {
  const zeroUpTo = (end: number) => g.slice(0, end).every((x) => x === 0);
  const embeddedIpv4 = () => g[6]! * 65536 + g[7]!;
  if (zeroUpTo(8)) return "unspecified";
  if (zeroUpTo(7) && g[7] === 1) return "loopback";
  if (zeroUpTo(5) && g[5] === 0xffff) return ipv4Range(embeddedIpv4());
  if (g[0] === 0x64 && g[1] === 0xff9b && g.slice(2, 6).every((x) => x === 0)) return ipv4Range(embeddedIpv4());
  const first = g[0]!;
  if ((first & 0xfe00) === 0xfc00) return "unique-local"; // fc00::/7, RFC 4193
  if ((first & 0xffc0) === 0xfe80) return "link-local"; // fe80::/10
  if ((first & 0xffc0) === 0xfec0) return "site-local"; // fec0::/10, deprecated by RFC 3879
  if ((first & 0xff00) === 0xff00) return "multicast"; // ff00::/8
  // Outside global unicast: IPv4-compatible ::/96, discard-only 100::/64, local NAT64 and the rest.
  if ((first & 0xe000) !== 0x2000) return "reserved";
  if (first === 0x2001 && g[1] === 0x0db8) return "documentation"; // 2001:db8::/32, RFC 3849
  if (first === 0x2001 && g[1]! < 0x0200) return "protocol assignments"; // 2001::/23 (Teredo 2001::/32 among them)
  if (first === 0x2002) return "6to4"; // 2002::/16, RFC 3056, deprecated by RFC 7526
  if ((first & 0xfff0) === 0x3ff0) return "documentation"; // 3fff::/20, RFC 9637
  return null;
}

/** The eight 16-bit groups of a valid IPv6 address (node:net has checked the form). */
function ipv6Groups(text: string): number[] {
  let full = text;
  const dotted = /(\d+\.\d+\.\d+\.\d+)$/.exec(full);
  if (dotted) {
    const n = ipv4Number(dotted[1]!);
    full = `${full.slice(0, dotted.index)}${Math.floor(n / 65536).toString(16)}:${(n % 65536).toString(16)}`;
  }
  const [head, tail] = full.split("::") as [string, string | undefined];
  const parse = (part: string | undefined) => (part ? part.split(":").map((h) => Number.parseInt(h, 16)) : []);
  const left = parse(head);
  const right = parse(tail);
  return [...left, ...Array<number>(8 - left.length - right.length).fill(0), ...right];
}

/** The first address that is not a public one, with its range; null when all are public. */
export function firstNonPublic(addresses: string[]): { address: string; range: SpecialRange } | null {
  for (const address of addresses) {
    const range = specialUseRange(address);
    if (range !== null) return { address, range };
  }
  return null;
}

/** `localhost` and its subdomains: RFC 6761 §6.3 has them resolve to loopback. */
export const isLocalhostName = (hostname: string) => /^(.+\.)?localhost\.?$/i.test(hostname);

/** A host that names this machine: a localhost name, or a loopback address. */
export const isLoopbackHost = (hostname: string) => isLocalhostName(hostname) || specialUseRange(hostname) === "loopback";

/** True for an IP literal (IPv6 with or without brackets), false for a name. */
export const isIpLiteral = (hostname: string) => isIP(hostname.replace(/^\[(.*)\]$/, "$1").replace(/%.*$/, "")) !== 0;
