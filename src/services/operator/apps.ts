import { nanoToUsd, usdAmountToNano } from "../../money";
import { DEFAULT_FUNDING_SOURCES, type App, type AppChanges } from "../../store/apps";
import type { FundingSource } from "../../store/connections";
import {
  fundingSources,
  invalid,
  isoOrNull,
  isoTime,
  MAX_GRANT_USD_CEILING,
  nonEmptyName,
  normaliseOrigin,
  notFound,
  requireApp,
  type OperatorContext,
} from "./input";
import { createAppWithKey } from "./secret-keys";
import type { AppDetailsView, AppStateView, AppView, CreatedAppView, UpdatedAppView } from "./views";

export interface NewApp {
  name: string;
  /** Browser origins allowed for session CORS and the consent popup. */
  origins?: string[];
  /** Largest one-time grant it may ask for; null or left out: the service default. */
  maxGrantUsd?: number | null;
  /** Most grant dollars it may have approved in one UTC day; null or left out: the service default. */
  grantDailyCeilingUsd?: number | null;
  /** Who may pay its users' calls (`app`, `user`), as each user chooses; left out: `app` only. */
  fundingSources?: string[];
}

/** What to change; a field left out stays. `origins` replaces the list as a whole. */
export interface AppUpdate {
  name?: string;
  origins?: string[];
  /** null: back to the service default. */
  maxGrantUsd?: number | null;
  grantDailyCeilingUsd?: number | null;
  /** Replaces the list as a whole. */
  fundingSources?: string[];
}

/** Apps: create (with a first key), read, rename, re-scope, disable and enable. */
export class AppOperations {
  constructor(private readonly context: OperatorContext) {}

  async create(input: NewApp): Promise<CreatedAppView> {
    const name = nonEmptyName(this.context.names, input.name);
    const origins = this.origins(input.origins) ?? [];
    const settings = {
      maxGrantNano: this.maxGrantNano(input.maxGrantUsd) ?? null,
      grantDailyCeilingNano: this.dailyCeilingNano(input.grantDailyCeilingUsd) ?? null,
      fundingSources: this.fundingSources(input.fundingSources),
    };
    const { app, key } = await createAppWithKey(this.context.store.apps, name, origins, this.context.clock.now(), settings);
    // Only the settings the app sets: the line keeps its fixed keys otherwise (ARCHITECTURE.md §4).
    const setLimits = Object.fromEntries(Object.entries(grantLimitsUsd(app)).filter(([, usd]) => usd !== null));
    const setSources = isDefaultFunding(app.fundingSources) ? {} : { fundingSources: app.fundingSources };
    return { appId: app.id, secretKey: key.secretKey, name: app.name, origins: app.origins, keyId: key.keyId, ...setLimits, ...setSources };
  }

  async list(): Promise<AppView[]> {
    const apps = await this.context.store.apps.list();
    return Promise.all(apps.map((app) => this.view(app)));
  }

  async show(appId: string): Promise<AppDetailsView> {
    return this.view(await requireApp(this.context, appId));
  }

  async update(appId: string, input: AppUpdate): Promise<UpdatedAppView> {
    const { names } = this.context;
    const changes: AppChanges = {
      name: input.name === undefined ? undefined : nonEmptyName(names, input.name),
      origins: this.origins(input.origins),
      maxGrantNano: this.maxGrantNano(input.maxGrantUsd),
      grantDailyCeilingNano: this.dailyCeilingNano(input.grantDailyCeilingUsd),
      fundingSources: this.fundingSources(input.fundingSources),
    };
    if (Object.values(changes).every((v) => v === undefined)) {
      const fields = [names.name, names.origins, names.maxGrantUsd, names.grantDailyCeilingUsd];
      throw invalid(`nothing to change: give ${fields.join(", ")} or ${names.fundingSources}`);
    }
    const app = await this.context.store.apps.update(appId, changes);
    if (!app) throw notFound(`no app ${appId}`);
    return { appId: app.id, name: app.name, origins: app.origins, ...grantLimitsUsd(app), fundingSources: app.fundingSources };
  }

  /** Its keys and sessions are refused at once, on every instance; its data is kept. */
  disable(appId: string): Promise<AppStateView> {
    return this.setDisabled(appId, this.context.clock.now());
  }

  enable(appId: string): Promise<AppStateView> {
    return this.setDisabled(appId, null);
  }

  private async setDisabled(appId: string, at: number | null): Promise<AppStateView> {
    if (!(await this.context.store.apps.setDisabled(appId, at))) throw notFound(`no app ${appId}`);
    return { appId, disabled: at !== null };
  }

  private async view(app: App): Promise<AppView> {
    const keys = (await this.context.store.apps.keysOf(app.id)).map((k) => ({
      keyId: k.id,
      createdAt: isoTime(k.createdAt),
      revokedAt: isoOrNull(k.revokedAt),
    }));
    return {
      appId: app.id,
      name: app.name,
      origins: app.origins,
      ...grantLimitsUsd(app),
      fundingSources: app.fundingSources,
      createdAt: isoTime(app.createdAt),
      disabledAt: isoOrNull(app.disabledAt),
      keys,
    };
  }

  private origins(given: string[] | undefined): string[] | undefined {
    return given?.map((origin) => normaliseOrigin(this.context.names, origin));
  }

  private fundingSources(given: string[] | undefined): FundingSource[] | undefined {
    return given === undefined ? undefined : fundingSources(this.context.names, given);
  }

  /** USD → nano-dollars, rounded down: a cap is never over-stated (ARCHITECTURE.md §3 "Money"). */
  private maxGrantNano(usd: number | null | undefined): number | null | undefined {
    return this.limitNano(usd, this.context.names.maxGrantUsd);
  }

  private dailyCeilingNano(usd: number | null | undefined): number | null | undefined {
    return this.limitNano(usd, this.context.names.grantDailyCeilingUsd);
  }

  private limitNano(usd: number | null | undefined, name: string): number | null | undefined {
    if (usd === undefined || usd === null) return usd;
    if (usd > MAX_GRANT_USD_CEILING) throw invalid(`${name} must be at most ${MAX_GRANT_USD_CEILING}`);
    return usdAmountToNano(usd, { rounding: "floor" }, (problem) => invalid(`${name} ${problem} (or ${this.context.names.serviceDefault})`));
  }
}

/** The app's own grant limits in USD; null: the service default applies. */
const grantLimitsUsd = (app: App) => ({
  maxGrantUsd: app.maxGrantNano === null ? null : nanoToUsd(app.maxGrantNano),
  grantDailyCeilingUsd: app.grantDailyCeilingNano === null ? null : nanoToUsd(app.grantDailyCeilingNano),
});

const isDefaultFunding = (sources: readonly FundingSource[]) =>
  sources.length === DEFAULT_FUNDING_SOURCES.length && sources.every((source, i) => source === DEFAULT_FUNDING_SOURCES[i]);
