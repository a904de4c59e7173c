/**
 * Which addresses a webhook may go to (src/webhooks/special-addresses.ts): a table of IPv4,
 * IPv6 and IPv4-in-IPv6 forms, each with the range it must fall in, or null for public.
 */
import { describe, expect, test } from "bun:test";
import { firstNonPublic, isLoopbackHost, specialUseRange, type SpecialRange } from "../../src/webhooks/special-addresses";

const TABLE: Array<[string, SpecialRange | null]> = [
  // IPv4
  ["0.0.0.0", "unspecified"],
  ["0.1.2.3", "this network"],
  ["10.0.0.1", "private"],
  ["10.255.255.255", "private"],
  ["100.64.0.1", "shared address space (CGNAT)"],
  ["100.127.255.254", "shared address space (CGNAT)"],
  ["100.128.0.1", null],
  ["127.0.0.1", "loopback"],
  ["127.255.0.9", "loopback"],
  ["169.254.169.254", "link-local"],
  ["172.16.0.1", "private"],
  ["172.31.255.255", "private"],
  ["172.32.0.1", null],
  ["192.0.0.8", "protocol assignments"],
  ["192.0.2.10", "documentation"],
  ["192.88.99.1", "6to4"],
  ["192.168.1.1", "private"],
  ["198.18.0.1", "benchmarking"],
  ["198.19.255.255", "benchmarking"],
  ["198.51.100.7", "documentation"],
  ["203.0.113.9", "documentation"],
  ["224.0.0.1", "multicast"],
  ["239.255.255.250", "multicast"],
  ["240.0.0.1", "reserved"],
  ["255.255.255.255", "broadcast"],
  ["8.8.8.8", null],
  ["1.1.1.1", null],
  ["93.184.216.34", null],
  ["11.0.0.1", null],
  ["223.255.255.254", null],
  // IPv6
  ["::", "unspecified"],
  ["::1", "loopback"],
  ["[::1]", "loopback"],
  ["fc00::1", "unique-local"],
  ["fd12:3456:789a::1", "unique-local"],
  ["fe80::1", "link-local"],
  ["fe80::1%eth0", "link-local"],
  ["febf::1", "link-local"],
  ["fec0::1", "site-local"],
  ["ff02::1", "multicast"],
  ["100::1", "reserved"],
  ["::7f00:1", "reserved"], // IPv4-compatible (deprecated)
  ["64:ff9b:1::1", "reserved"], // local-use NAT64
  ["5f00::1", "reserved"],
  ["2001:db8::1", "documentation"],
  ["3fff::1", "documentation"],
  ["2001::1", "protocol assignments"], // Teredo
  ["2001:1ff::1", "protocol assignments"],
  ["2002:7f00:1::1", "6to4"],
  ["2606:4700:4700::1111", null],
  ["2001:4860:4860::8888", null],
  ["2a00:1450:4001:80b::200e", null],
  // IPv4-mapped and NAT64 forms: judged by the IPv4 address inside
  ["::ffff:127.0.0.1", "loopback"],
  ["::ffff:7f00:1", "loopback"],
  ["::ffff:169.254.169.254", "link-local"],
  ["::ffff:a9fe:a9fe", "link-local"],
  ["::ffff:10.0.0.1", "private"],
  ["[::ffff:192.168.0.1]", "private"],
  ["::ffff:0.0.0.0", "unspecified"],
  ["::ffff:8.8.8.8", null],
  ["64:ff9b::127.0.0.1", "loopback"],
  ["64:ff9b::a9fe:a9fe", "link-local"],
  ["64:ff9b::808:808", null],
  // Not an address at all
  ["localhost", "reserved"],
  ["example.com", "reserved"],
  ["", "reserved"],
];

describe("special-use addresses", () => {
  test.each(TABLE)("%p is %p", (address, range) => {
    expect(specialUseRange(address)).toBe(range);
  });

  test("loopback hosts: localhost names and loopback addresses, nothing else", () => {
    for (const host of ["localhost", "LOCALHOST", "api.localhost", "localhost.", "127.0.0.1", "127.1.2.3", "[::1]", "::1"])
      expect(isLoopbackHost(host)).toBe(true);
    for (const host of ["localhost.example.com", "notlocalhost", "10.0.0.1", "::2", "example.com"]) expect(isLoopbackHost(host)).toBe(false);
  });

  test("a host is refused if ANY of its addresses is not public, whichever comes first", () => {
    expect(firstNonPublic(["93.184.216.34", "2606:4700:4700::1111"])).toBeNull();
    expect(firstNonPublic(["93.184.216.34", "10.0.0.1"])).toEqual({ address: "10.0.0.1", range: "private" });
    expect(firstNonPublic(["::ffff:169.254.169.254", "8.8.8.8"])).toEqual({ address: "::ffff:169.254.169.254", range: "link-local" });
    expect(firstNonPublic([])).toBeNull();
  });
});
