/**
 * Bun's runtime settings the service is run with (src/launch/runtime-env.ts says why they
 * are environment variables set where the service starts): the bench, the soak and the tests
 * start the service with them from here.
 */
export { RUNTIME_ENV } from "../src/launch/runtime-env";
