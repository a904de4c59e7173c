/** The operator commands on webhook endpoints; the operations themselves are shared with the admin API. */
import { ApiError } from "../errors";
import { WEBHOOK_EVENT_TYPES } from "../store/webhooks";
import { WebhookEndpointOperations } from "../services/webhook-endpoints";
import { APP, print, refuse, text, UsageError, type Command, type Values } from "./shared";

const ENDPOINT = { ...APP, endpoint: { type: "string" } } as const;

/** The shared operations speak ApiError: a bad value is a usage mistake (exit 2), an unknown id a refusal (exit 1). */
async function operate(work: () => Promise<void>): Promise<number> {
  try {
    await work();
    return 0;
  } catch (err) {
    if (err instanceof ApiError && err.code === "not_found") return refuse(err.message);
    if (err instanceof ApiError && err.code === "invalid_request") throw new UsageError(err.message);
    throw err;
  }
}

function limit(values: Values): number {
  const raw = text(values, "limit", false) ?? "50";
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 1 || n > 1000) throw new UsageError("--limit must be a whole number from 1 to 1000");
  return n;
}

export const WEBHOOK_COMMANDS: Command[] = [
  {
    name: "webhook add",
    usage: "--app APP_ID --url URL [--event TYPE]...",
    summary: `register an endpoint (all events unless --event: ${WEBHOOK_EVENT_TYPES.join(", ")}); prints its signing secret, once`,
    options: { ...APP, url: { type: "string" }, event: { type: "string", multiple: true } },
    run: (store, values, now) =>
      operate(async () => print(await new WebhookEndpointOperations(store).add(text(values, "app")!, text(values, "url")!, values.event as string[] | undefined, now))),
  },
  {
    name: "webhook list",
    usage: "--app APP_ID",
    summary: "one JSON line per endpoint of the app (no secrets)",
    options: APP,
    run: (store, values) =>
      operate(async () => {
        for (const endpoint of await new WebhookEndpointOperations(store).list(text(values, "app")!)) print(endpoint);
      }),
  },
  {
    name: "webhook remove",
    usage: "--app APP_ID --endpoint ENDPOINT_ID",
    summary: "delete an endpoint and its pending deliveries",
    options: ENDPOINT,
    run: (store, values) =>
      operate(async () => {
        await new WebhookEndpointOperations(store).remove(text(values, "app")!, text(values, "endpoint")!);
        print({ endpointId: values.endpoint, removed: true });
      }),
  },
  {
    name: "webhook disable",
    usage: "--app APP_ID --endpoint ENDPOINT_ID",
    summary: "stop sending to an endpoint (its pending deliveries fail)",
    options: ENDPOINT,
    run: (store, values, now) => operate(async () => print(await new WebhookEndpointOperations(store).disable(text(values, "app")!, text(values, "endpoint")!, now))),
  },
  {
    name: "webhook enable",
    usage: "--app APP_ID --endpoint ENDPOINT_ID",
    summary: "send to an endpoint again (e.g. after it answered 410 Gone)",
    options: ENDPOINT,
    run: (store, values) => operate(async () => print(await new WebhookEndpointOperations(store).enable(text(values, "app")!, text(values, "endpoint")!))),
  },
  {
    name: "webhook deliveries",
    usage: "--app APP_ID [--endpoint ENDPOINT_ID] [--limit N]",
    summary: "the app's latest deliveries, newest first: state, attempts, last status and error",
    options: { ...ENDPOINT, limit: { type: "string" } },
    run: (store, values) =>
      operate(async () => {
        const ops = new WebhookEndpointOperations(store);
        for (const d of await ops.deliveries(text(values, "app")!, limit(values), text(values, "endpoint", false))) print(d);
      }),
  },
];
