/** The operator command for a lost secrets key (README, "Secrets at rest"); src/store/stored-secrets.ts does the work. */
import { forgetUnreadableSecrets } from "../store/stored-secrets";
import { print, UsageError, type Command } from "./shared";

export const SECRETS_COMMANDS: Command[] = [
  {
    name: "secrets reset",
    usage: "--confirm",
    summary:
      "after the secrets key is lost: delete what it sealed and the key in use cannot open (the stored JWT secret: " +
      "sessions in flight end; webhook endpoints: listed, to be added again) and seal the store under the key in use",
    options: { confirm: { type: "boolean" } },
    skipsSecretsCheck: true,
    async run(_operator, values, store) {
      // Irreversible, and wrong when the right key is only misconfigured: asked for explicitly.
      if (values.confirm !== true) throw new UsageError("--confirm is required: this deletes every stored secret the key in use cannot open");
      print(await forgetUnreadableSecrets(store));
    },
  },
];
