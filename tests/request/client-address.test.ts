/**
 * Who a request comes from (src/request/client-address.ts): the peer, unless the peer is a
 * trusted proxy (TRUSTED_PROXY), then the first forwarded address from the right that no
 * trusted proxy holds; a client's own X-Forwarded-For is never believed. IPv6 clients count
 * by their /64. TRUSTED_PROXY entries that are not addresses or ranges are refused at start.
 */
import { describe, expect, test } from "bun:test";
import { ClientAddresses, clientKey } from "../../src/request/client-address";
import { ConfigError, loadConfig } from "../../src/config";

const forwarded = (value: string) => new Headers({ "x-forwarded-for": value });

describe("the client's address", () => {
  test("without TRUSTED_PROXY it is the peer's, whatever X-Forwarded-For says", () => {
    const addresses = new ClientAddresses(loadConfig({}).trustedProxies);
    expect(addresses.of("203.0.113.9", forwarded("198.51.100.1"))).toBe("203.0.113.9");
    expect(addresses.of(undefined, forwarded("198.51.100.1"))).toBe("unknown");
  });

  test("behind trusted proxies, the first forwarded address from the right that is not one of them", () => {
    const addresses = new ClientAddresses(loadConfig({ TRUSTED_PROXY: "127.0.0.1, 10.0.0.0/8,fd00::/8" }).trustedProxies);
    expect(addresses.of("127.0.0.1", forwarded("198.51.100.7"))).toBe("198.51.100.7");
    // A client that writes its own header: only what the trusted hops appended counts.
    expect(addresses.of("127.0.0.1", forwarded("1.1.1.1, 198.51.100.7, 10.2.3.4"))).toBe("198.51.100.7");
    expect(addresses.of("fd12::1", forwarded("2001:db8:1:2::5"))).toBe("2001:db8:1:2::5");
    expect(addresses.of("127.0.0.1", forwarded("[2001:db8::9]:443, 198.51.100.8:5000"))).toBe("198.51.100.8");
    // No header, or every hop trusted: the nearest address there is.
    expect(addresses.of("127.0.0.1", new Headers())).toBe("127.0.0.1");
    expect(addresses.of("127.0.0.1", forwarded("10.0.0.5, 10.0.0.6"))).toBe("10.0.0.5");
    // A malformed entry breaks the chain: the address a trusted hop vouched for stands.
    expect(addresses.of("127.0.0.1", forwarded("198.51.100.1, not-an-address, 10.0.0.7"))).toBe("10.0.0.7");
  });

  test("a peer that is not a trusted proxy is the client, its X-Forwarded-For ignored", () => {
    const addresses = new ClientAddresses(["10.0.0.0/8"]);
    expect(addresses.of("203.0.113.9", forwarded("198.51.100.1"))).toBe("203.0.113.9");
    expect(addresses.of("::ffff:10.1.1.1", forwarded("198.51.100.1"))).toBe("198.51.100.1");
  });

  test("IPv6 clients count by their /64; IPv4-mapped ones as their IPv4", () => {
    expect(clientKey("2001:db8:aa:bb:1:2:3:4")).toBe("2001:db8:aa:bb::/64");
    expect(clientKey("2001:db8:aa:bb::99")).toBe("2001:db8:aa:bb::/64");
    expect(clientKey("2001:0db8:00aa:00bb:ffff::1")).toBe("2001:db8:aa:bb::/64");
    expect(clientKey("2001:db8::1")).toBe("2001:db8:0:0::/64");
    expect(clientKey("::1")).toBe("0:0:0:0::/64");
    expect(clientKey("::ffff:198.51.100.4")).toBe("198.51.100.4");
    expect(clientKey("198.51.100.4")).toBe("198.51.100.4");
    expect(clientKey("unknown")).toBe("unknown");
  });

  test("TRUSTED_PROXY entries that are not addresses or CIDR ranges are refused, each named", () => {
    const refused = (() => {
      try {
        loadConfig({ TRUSTED_PROXY: "10.0.0.0/33,proxy.internal,::1/129,127.0.0.1" });
      } catch (err) {
        return err;
      }
    })() as ConfigError;
    expect(refused).toBeInstanceOf(ConfigError);
    expect(refused.problems).toEqual([
      `TRUSTED_PROXY: "10.0.0.0/33"'s prefix length must be from 0 to 32`,
      `TRUSTED_PROXY: "proxy.internal" is not an IP address or a CIDR range`,
      `TRUSTED_PROXY: "::1/129"'s prefix length must be from 0 to 128`,
    ]);
  });
});
