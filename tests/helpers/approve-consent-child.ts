/**
 * A separate process that approves one consent token on a SQLite file, for the test that
 * races approvals across processes. Arguments: the database path and the token. It waits
 * for a line on stdin first, so the parent can start every child and then release them all
 * at once; it prints the approval's kind.
 */
import { openSqliteStore } from "../../src/store/sqlite";

const [path, token] = process.argv.slice(2);
const store = openSqliteStore(path!);
console.log("ready");
for await (const _line of console) break;
const approval = await store.grants.approveConsent(token!, Date.now());
console.log(approval.kind);
await store.close();
