import { Elysia } from "elysia";
import type { RequestContext } from "./context";

/**
 * Types `requestContext` on Elysia's context for every plugin that uses this one (the
 * guards, the routes, the access log, the error handler). Its value is each request's own,
 * set by the first hook that runs (src/http/request-context.ts, onRequest); the decorator
 * only gives every context Elysia makes the field from the start, null until then.
 */
export const requestContextSlot = new Elysia({ name: "request-context" }).decorate("requestContext", null as unknown as RequestContext);
