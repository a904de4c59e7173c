/** The operator commands on webhook endpoints (ARCHITECTURE.md §6), over the shared operator service. */
import { WEBHOOK_EVENT_TYPES } from "../store/webhooks";
import { APP, print, text, type Command } from "./shared";

const ENDPOINT = { ...APP, endpoint: { type: "string" } } as const;
/** How many deliveries `webhook deliveries` shows without --limit. */
const DELIVERIES_SHOWN = 50;

export const WEBHOOK_COMMANDS: Command[] = [
  {
    name: "webhook add",
    usage: "--app APP_ID --url URL [--event TYPE]...",
    summary: `register an endpoint (all events unless --event: ${WEBHOOK_EVENT_TYPES.join(", ")}); prints its signing secret, once`,
    defaults: { "--event": `every event type (listed as "events": "all")` },
    options: { ...APP, url: { type: "string" }, event: { type: "string", multiple: true } },
    async run(operator, values) {
      print(await operator.webhooks.add(text(values, "app")!, { url: text(values, "url")!, events: values.event as string[] | undefined }));
    },
  },
  {
    name: "webhook list",
    usage: "--app APP_ID",
    summary: "one JSON line per endpoint of the app (no secrets)",
    options: APP,
    async run(operator, values) {
      for (const endpoint of await operator.webhooks.list(text(values, "app")!)) print(endpoint);
    },
  },
  {
    name: "webhook remove",
    usage: "--app APP_ID --endpoint ENDPOINT_ID",
    summary: "delete an endpoint and its pending deliveries",
    options: ENDPOINT,
    async run(operator, values) {
      print(await operator.webhooks.remove(text(values, "app")!, text(values, "endpoint")!));
    },
  },
  {
    name: "webhook disable",
    usage: "--app APP_ID --endpoint ENDPOINT_ID",
    summary: "stop sending to an endpoint (its pending deliveries fail)",
    options: ENDPOINT,
    async run(operator, values) {
      print(await operator.webhooks.disable(text(values, "app")!, text(values, "endpoint")!));
    },
  },
  {
    name: "webhook enable",
    usage: "--app APP_ID --endpoint ENDPOINT_ID",
    summary: "send to an endpoint again (e.g. after it answered 410 Gone)",
    options: ENDPOINT,
    async run(operator, values) {
      print(await operator.webhooks.enable(text(values, "app")!, text(values, "endpoint")!));
    },
  },
  {
    name: "webhook deliveries",
    usage: "--app APP_ID [--endpoint ENDPOINT_ID] [--limit N]",
    summary: "the app's latest deliveries, newest first: state, attempts, last status and error",
    defaults: { "--endpoint": "every endpoint of the app", "--limit": `${DELIVERIES_SHOWN} (at most 1000)` },
    options: { ...ENDPOINT, limit: { type: "string" } },
    async run(operator, values) {
      const limit = Number(text(values, "limit", false) ?? DELIVERIES_SHOWN);
      for (const d of await operator.webhooks.deliveries(text(values, "app")!, limit, text(values, "endpoint", false))) print(d);
    },
  },
];
