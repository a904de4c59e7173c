/**
 * The upstream keys the mock knows, and whose each one is: the operator's key (whatever key
 * the service sends; any key the mock did not issue, unless `operatorKeys` lists them) and
 * the user keys the PKCE flow creates (./auth-keys.ts). Every generation's final cost is
 * added to the key that paid for it (./generation.ts), so GET /key and the 402 refusals
 * (./credit.ts) follow the same books as GET /generation.
 *
 * A key the mock issued stays in the book when deleted, so it keeps answering 401; a key of
 * the issued shape that the book does not hold (one from an earlier run of the mock, say)
 * answers 401 too, rather than passing for an operator key that pays without limit.
 */
import { KeyUsage, type UsageLimitType } from "./key-usage";

/** What a key is created with (POST /auth/keys/code's fields; the /auth page's query). */
export interface KeySettings {
  /** Credit limit in USD; null: none. */
  limitUsd: number | null;
  /** The limit resets on this interval (it holds against that period's usage); null: never. */
  usageLimitType: UsageLimitType | null;
  /** Shown by GET /key; null: the key's masked form, as OpenRouter labels an unnamed key. */
  label: string | null;
  /** Mock clock, ms: from then on the key answers 401; null: never. */
  expiresAt: number | null;
}

export const NO_LIMITS: Readonly<KeySettings> = Object.freeze({ limitUsd: null, usageLimitType: null, label: null, expiresAt: null });

/** One key and its books. Tests may change the settings and flags, as its owner could on OpenRouter's site. */
export interface MockKeyAccount extends KeySettings {
  readonly key: string;
  /** "operator": a key the service was configured with; "user": one the mock issued. */
  readonly kind: "operator" | "user";
  /** The account the key belongs to (`user_id` of POST /auth/keys, `creator_user_id` of GET /key). */
  readonly userId: string;
  label: string;
  /** Turned off by its owner: calls answer 401 until it is turned back on. */
  disabled: boolean;
  /** Deleted by its owner: calls answer 401 from then on. */
  deleted: boolean;
  readonly usage: KeyUsage;
}

export type KeyLookup = { account: MockKeyAccount } | { status: 401; message: string };

/** The account the /auth page offers, and whose keys `create` makes unless told otherwise. */
export const DEFAULT_ACCOUNT = "mock-user";

/** `sk-or-v1-` and 64 hex digits, the shape of OpenRouter's keys, which the issued keys take. */
const ISSUED_KEY = /^sk-or-v1-[0-9a-f]{64}$/;

export interface KeyBookOptions {
  /** See MockUpstreamOptions.operatorKeys: null accepts any key the mock did not issue. */
  operatorKeys: readonly string[] | null;
  operatorLimitUsd: number | null;
}

export class KeyBook {
  private readonly accounts = new Map<string, MockKeyAccount>();

  constructor(private readonly options: KeyBookOptions) {}

  /** A new user key on the account `userId` (what an approved PKCE flow ends in). */
  create(settings: Partial<KeySettings> = {}, userId = userIdFor(DEFAULT_ACCOUNT)): MockKeyAccount {
    const bytes = crypto.getRandomValues(new Uint8Array(32));
    const key = `sk-or-v1-${Buffer.from(bytes).toString("hex")}`;
    return this.add(key, "user", userId, { ...NO_LIMITS, ...settings });
  }

  /** The key's account whatever its state; undefined for a key never seen. */
  get(key: string): MockKeyAccount | undefined {
    return this.accounts.get(key);
  }

  /** Who a bearer key is, or why it is refused (401) at `now`. */
  lookup(key: string, now: number): KeyLookup {
    const known = this.accounts.get(key);
    if (known) {
      if (known.deleted) return { status: 401, message: "User not found." };
      if (known.disabled) return { status: 401, message: "API key is disabled" };
      if (known.expiresAt !== null && now >= known.expiresAt) return { status: 401, message: "API key has expired" };
      return { account: known };
    }
    const operators = this.options.operatorKeys;
    if (ISSUED_KEY.test(key) || (operators !== null && !operators.includes(key))) return { status: 401, message: "User not found." };
    // First call with an operator key: its books start now.
    const settings = { ...NO_LIMITS, limitUsd: this.options.operatorLimitUsd };
    return { account: this.add(key, "operator", userIdFor("operator"), settings) };
  }

  /** Adds a generation's final cost to the key that paid for it. */
  charge(account: MockKeyAccount, usd: number, now: number): void {
    if (usd > 0) account.usage.add(usd, now);
  }

  private add(key: string, kind: MockKeyAccount["kind"], userId: string, settings: KeySettings): MockKeyAccount {
    const account: MockKeyAccount = {
      ...settings,
      key,
      kind,
      userId,
      label: settings.label ?? maskedKey(key),
      disabled: false,
      deleted: false,
      usage: new KeyUsage(),
    };
    this.accounts.set(key, account);
    return account;
  }
}

/** How OpenRouter shows a key it lists: its first and last characters only. */
export function maskedKey(key: string): string {
  return key.length <= 16 ? "***" : `${key.slice(0, 12)}...${key.slice(-3)}`;
}

/** A stable, OpenRouter-looking user id (`user_` and 27 letters and digits) for an account name. */
export function userIdFor(account: string): string {
  const digest = new Bun.CryptoHasher("sha256").update(`mock-account:${account}`).digest("base64");
  return `user_${digest.replace(/[^A-Za-z0-9]/g, "").slice(0, 27)}`;
}
