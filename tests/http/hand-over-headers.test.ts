import { describe, expect, test } from "bun:test";
import { Elysia } from "elysia";
import { handOverHeaders } from "../../src/http/hand-over-headers";

describe("handOverHeaders", () => {
  test("moves the route's headers into the Response, keeps the Response's own, and empties set.headers", () => {
    const set: Record<string, unknown> = { "x-request-id": "r1", "ratelimit-remaining": 7, "content-type": "text/plain", skipped: undefined };
    const response = handOverHeaders(new Response("{}", { headers: { "content-type": "application/json" } }), set);
    expect(response.headers.get("x-request-id")).toBe("r1");
    expect(response.headers.get("ratelimit-remaining")).toBe("7");
    expect(response.headers.get("content-type")).toBe("application/json");
    expect(response.headers.has("skipped")).toBe(false);
    expect(Object.keys(set)).toEqual([]);
  });

  test("through Elysia, the handed-over Response is the one the client gets, with every header", async () => {
    let returned: Response | undefined;
    const app = new Elysia()
      .onRequest(({ set }) => {
        set.headers["x-request-id"] = "r2";
      })
      .get("/", ({ set }) => {
        set.headers["ratelimit-limit"] = "10";
        returned = handOverHeaders(new Response("ok", { headers: { "x-own": "1" } }), set.headers);
        return returned;
      });
    const answer = await app.handle(new Request("http://localhost/"));
    // Elysia rebuilds a Response when set.headers is not empty; emptied, it passes ours on.
    expect(answer).toBe(returned!);
    expect(Object.fromEntries(answer.headers)).toMatchObject({ "x-request-id": "r2", "ratelimit-limit": "10", "x-own": "1" });
    expect(await answer.text()).toBe("ok");
  });
});
