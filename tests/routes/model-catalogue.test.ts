/**
 * GET /api/v1/models keeps the upstream's list shape (spec/openrouter-openapi.yaml,
 * ModelsListResponse: `data`, `total_count`, `links.next`) and pages as the upstream pages:
 * the whole list without `offset` and `limit`, else `limit` (default 500) from `offset`.
 * Each body is held to the upstream's schema and to our own openapi.json.
 */
import { beforeAll, describe, expect, test } from "bun:test";
import { BILLING_MODELS, DEFAULT_MODELS } from "../../packages/mock-upstream/src";
import { chatTestApp, type ChatTestApp } from "../helpers/chat-app";
import { publishedDocument, type PublishedDocument } from "../helpers/openapi-validator";
import { validateModels } from "../helpers/openrouter-spec";

const PATH = "/api/v1/models";
const models = () => [...DEFAULT_MODELS, ...BILLING_MODELS].map((m) => ({ ...m, pricing: { ...m.pricing } }));
const ids = (body: { data: Array<{ id: string }> }) => body.data.map((m) => m.id);

let t: ChatTestApp;
let doc: PublishedDocument;
let allIds: string[];

beforeAll(async () => {
  t = await chatTestApp({ mock: { models: models() } });
  doc = await publishedDocument((path) => t.app.handle(new Request(`http://localhost${path}`)));
  allIds = models().map((m) => m.id);
});

/** GET with the secret key; the body checked against the upstream's schema and our openapi.json. */
async function page(query = ""): Promise<any> {
  const res = await t.get(`${PATH}${query}`);
  expect(res.status).toBe(200);
  const body = await res.clone().json();
  expect(await doc.conformance("get", PATH, res)).toEqual([]);
  expect(validateModels(body)).toEqual([]);
  return body;
}

describe("GET /api/v1/models: the upstream's list shape", () => {
  test("without offset and limit: the whole catalogue, its count, no next page", async () => {
    const body = await page();
    expect(ids(body)).toEqual(allIds);
    expect(body.total_count).toBe(allIds.length);
    expect(body.links).toEqual({ next: null });
  });

  test("with a limit: pages whose next links, followed, give the whole catalogue once", async () => {
    const seen: string[] = [];
    let next: string | null = `${PATH}?limit=3`;
    let pages = 0;
    while (next !== null) {
      const body = await page(next.slice(PATH.length));
      expect(body.total_count).toBe(allIds.length);
      expect(body.data.length).toBeLessThanOrEqual(3);
      seen.push(...ids(body));
      next = body.links.next;
      pages++;
    }
    expect(seen).toEqual(allIds);
    expect(pages).toBe(Math.ceil(allIds.length / 3));
  });

  test("an offset alone pages by the upstream's default of 500; past the end, an empty last page", async () => {
    const second = await page("?offset=2");
    expect(ids(second)).toEqual(allIds.slice(2));
    expect(second.links.next).toBeNull();
    const beyond = await page(`?offset=${allIds.length + 5}&limit=10`);
    expect(beyond).toMatchObject({ data: [], total_count: allIds.length, links: { next: null } });
  });

  test("filters this proxy does not apply are ignored, as before: the catalogue is the upstream's default list", async () => {
    expect(ids(await page("?category=programming&sort=newest"))).toEqual(allIds);
  });

  test("a limit out of the upstream's range (1 to 1000) or a negative offset: 400 invalid_request", async () => {
    for (const query of ["?limit=0", "?limit=1001", "?offset=-1", "?limit=ten"]) {
      const res = await t.get(`${PATH}${query}`);
      const body = (await res.clone().json()) as { error: { code: string } };
      expect({ query, status: res.status, code: body.error.code, errors: await doc.conformance("get", PATH, res) }).toEqual({
        query,
        status: 400,
        code: "invalid_request",
        errors: [],
      });
    }
  });

  test("the schemas are not vacuous: a list without total_count or links fails both", () => {
    const bare = { data: [] };
    expect(validateModels(bare)).not.toEqual([]);
    expect(doc.responseValidator("get", PATH, 200)(bare)).toBe(false);
  });
});

describe("GET /api/v1/models/{author}/{slug}: one model, where the list links", () => {
  test("every entry's links.details is its path here, and following it gives the same entry", async () => {
    const body = await page();
    for (const model of body.data as Array<{ id: string; links: { details: string } }>) {
      expect(model.links.details).toBe(`${PATH}/${model.id}`);
      const res = await t.get(model.links.details);
      expect({ id: model.id, status: res.status }).toEqual({ id: model.id, status: 200 });
      const one = await res.clone().json();
      expect(await doc.conformance("get", `${PATH}/{author}/{slug}`, res)).toEqual([]);
      expect(one).toEqual(model);
    }
  });

  test("the id as one segment, its / encoded (what the openai SDK's models.retrieve sends), answers the same", async () => {
    const id = allIds.find((m) => m.includes("/"))!;
    const plain = await (await t.get(`${PATH}/${id}`)).json();
    const encoded = await t.get(`${PATH}/${encodeURIComponent(id)}`);
    expect(encoded.status).toBe(200);
    expect(await encoded.json()).toEqual(plain);
  });

  test("a model the catalogue does not list is 404 not_found, naming it", async () => {
    for (const path of [`${PATH}/nobody/nothing`, `${PATH}/${encodeURIComponent("nobody/nothing")}`, `${PATH}/openai`]) {
      const res = await t.get(path);
      expect({ path, status: res.status }).toEqual({ path, status: 404 });
      const { error } = (await res.json()) as { error: { code: string; message: string } };
      expect(error.code).toBe("not_found");
      expect(error.message).toStartWith("no model ");
    }
  });
});
