/**
 * The operator commands on the secrets key (README, "Secrets at rest"): a rotation, and the
 * repair after a lost key. src/store/secrets-rotation.ts and stored-secrets.ts do the work.
 */
import { systemClock } from "../clock";
import { forgetUnreadableSecrets } from "../store/stored-secrets";
import { resealStoredSecrets } from "../store/secrets-rotation";
import { print, UsageError, type Command } from "./shared";

export const SECRETS_COMMANDS: Command[] = [
  {
    name: "keys rotate-kek",
    usage: "",
    summary:
      "re-seal every secret the store keeps (JWT secret, webhook secrets, users' upstream keys, pending funding flows) under SECRETS_KEY, " +
      "opening old values with SECRETS_KEY_PREVIOUS; prints how many of each it re-sealed. Run again: re-seals nothing",
    options: {},
    async run(_operator, _values, store) {
      print(await resealStoredSecrets(store));
    },
  },
  {
    name: "secrets reset",
    usage: "--confirm",
    summary:
      "after the secrets key is lost: delete what it sealed and the key in use cannot open (the stored JWT secret: " +
      "sessions in flight end; webhook endpoints: listed, to be added again; users' upstream keys: listed, each user links one again) " +
      "and seal the store under the key in use",
    options: { confirm: { type: "boolean" } },
    skipsSecretsCheck: true,
    async run(_operator, values, store) {
      // Irreversible, and wrong when the right key is only misconfigured: asked for explicitly.
      if (values.confirm !== true) throw new UsageError("--confirm is required: this deletes every stored secret the key in use cannot open");
      print(await forgetUnreadableSecrets(store, systemClock.now()));
    },
  },
];
