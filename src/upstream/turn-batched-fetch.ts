import type { FetchUpstream } from "./client";

/**
 * Bun's `fetch` hands every request to its HTTP client thread and wakes that thread. When
 * the thread shares a core with the JavaScript thread, each wake-up preempts the JavaScript
 * mid-turn, and under load that happened about once per call: the switches and the client
 * thread's kernel time were a quarter of a call's CPU (ARCHITECTURE.md §7 "Upstream calls
 * per turn"). So only the first call of an event-loop turn is issued at once; the calls
 * started after it in the same turn wait for the turn's end (`setImmediate`) and go out
 * together, back to back, so the client thread finds them waiting in one wake-up. A call
 * made alone is issued at once, as before.
 */
export function turnBatchedFetch(fetchNow: FetchUpstream): FetchUpstream {
  let turnStarted = false;
  let waiting: Array<() => void> = [];

  const endTurn = () => {
    turnStarted = false;
    const batch = waiting;
    waiting = [];
    for (const issue of batch) issue();
  };

  return (url, init) => {
    if (!turnStarted) {
      turnStarted = true;
      setImmediate(endTurn);
      return fetchNow(url, init);
    }
    return new Promise<Response>((resolve, reject) => {
      waiting.push(() => {
        // A throw (a bad URL, say) must fail this call alone, not the rest of the batch.
        try {
          fetchNow(url, init).then(resolve, reject);
        } catch (err) {
          reject(err);
        }
      });
    });
  };
}
