/**
 * The operator's operations, each held once: validation, store calls and the JSON shape of
 * the result. The CLI (src/cli/) and the admin API (src/routes/admin/) are two thin
 * surfaces over it, so they cannot drift apart. A new resource is one more file here and
 * one more field below, then its commands and routes.
 */
import type { Clock } from "../../clock";
import type { Store } from "../../store";
import { AppOperations } from "./apps";
import { GrantOperations } from "./grants";
import { JSON_INPUT_NAMES, type InputNames } from "./input";
import { KeyOperations } from "./keys";
import { UsageExportOperations } from "./usage-export";
import { UsageReconcileOperations } from "./usage-reconcile";
import { UserConnectionOperations } from "./user-connections";
import { WebhookOperations } from "./webhooks";

export interface OperatorPolicy {
  allowPrivateWebhookAddresses: boolean;
}

export class OperatorService {
  readonly apps: AppOperations;
  readonly keys: KeyOperations;
  readonly connections: UserConnectionOperations;
  readonly grants: GrantOperations;
  readonly usage: UsageExportOperations;
  readonly reconcile: UsageReconcileOperations;
  readonly webhooks: WebhookOperations;

  /**
   * `names`: how the caller's surface names the inputs, for the messages of refusals;
   * `policy`: the settings operations follow (config.webhooks.allowPrivateAddresses).
   */
  constructor(store: Store, clock: Clock, names: InputNames = JSON_INPUT_NAMES, policy: OperatorPolicy = { allowPrivateWebhookAddresses: false }) {
    const context = { store, clock, names, ...policy };
    this.apps = new AppOperations(context);
    this.keys = new KeyOperations(context);
    this.connections = new UserConnectionOperations(context);
    this.grants = new GrantOperations(context);
    this.usage = new UsageExportOperations(context);
    this.reconcile = new UsageReconcileOperations(context);
    this.webhooks = new WebhookOperations(context);
  }
}

export type { InputNames } from "./input";
export type { NewApp, AppUpdate } from "./apps";
export type { PageRequest } from "./paging";
export { MAX_PAGE_SIZE } from "./paging";
export type { ExportFormat, UsageExport } from "./usage-export";
export type { ReconcileDifference, ReconcileSummary } from "./usage-reconcile";
