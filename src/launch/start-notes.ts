/**
 * What the start-up log says about the settings an operator may not know are on, or must set:
 * the admin API and the metrics route (each opened by a token), webhooks allowed to private
 * addresses (a development setting), and, in production, a PUBLIC_URL left unset, which would
 * send users who link their own upstream account back to `http://localhost:<PORT>`.
 */
import type { Config } from "../config";
import { API_PREFIX } from "../app";
import { FUNDING_CALLBACK_ROUTE } from "../routes/funding";

export interface StartNote {
  level: "info" | "warn";
  msg: string;
}

/** `publicUrlSet`: PUBLIC_URL was given (unset, Config.publicUrl is the localhost default). */
export function startNotes(config: Config, publicUrlSet: boolean): StartNote[] {
  const notes: StartNote[] = [];
  if (config.adminToken) notes.push({ level: "info", msg: "admin API on: /api/v1/admin/ answers requests with Authorization: Bearer $ADMIN_TOKEN" });
  if (config.metricsToken) notes.push({ level: "info", msg: "metrics on: GET /metrics answers requests with Authorization: Bearer $METRICS_TOKEN" });
  if (config.webhooks.allowPrivateAddresses) {
    notes.push({
      level: "warn",
      msg: "WEBHOOK_ALLOW_PRIVATE_ADDRESSES is on: webhooks may go to private, loopback and other non-public addresses, and http to this machine (local development only)",
    });
  }
  if (config.env === "production" && !publicUrlSet) {
    notes.push({
      level: "warn",
      msg:
        `PUBLIC_URL is not set: users who link their own upstream account would be sent back to ${config.publicUrl}${API_PREFIX}${FUNDING_CALLBACK_ROUTE}. ` +
        "Set it to the address browsers reach this service at (https)",
    });
  }
  return notes;
}
