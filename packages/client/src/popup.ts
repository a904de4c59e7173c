/**
 * Talking to one of the service's pages in a popup (the connect page, the grant consent
 * page): a message counts only if it comes from the popup this call opened and from the
 * service's origin, so neither another window nor another site can answer for it. A popup
 * closed before it answered rejects instead of leaving the promise pending.
 */

/** The popup was blocked, or closed before it answered. */
export class PopupClosedError extends Error {
  constructor(message = "the window was closed before it answered") {
    super(message);
    this.name = "PopupClosedError";
  }
}

/** How often a popup is looked at to see whether the user closed it (a closed window sends no event). */
const CLOSED_CHECK_MS = 250;

/**
 * Opens `url` (on `serviceOrigin`) and settles with the first value `onMessage` returns for
 * one of its messages; `onMessage` may also answer the popup, or throw to reject. Call it
 * from a click: browsers block popups opened without a user gesture.
 */
export function popupFlow<T>(
  url: string,
  serviceOrigin: string,
  onMessage: (data: Record<string, unknown>, popup: Window) => T | undefined | Promise<T | undefined>,
): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const popup = window.open(url, "metered-proxy", "popup,width=480,height=720");
    if (!popup) {
      reject(new PopupClosedError("the browser blocked the popup: call this from a click"));
      return;
    }
    let done = false;
    const settle = (finish: () => void) => {
      if (done) return;
      done = true;
      window.removeEventListener("message", listener);
      clearInterval(closedCheck);
      finish();
    };
    // The service's pages close themselves once told their answer arrived: a window closed
    // right after postMessage can look closed here before its message lands.
    const acknowledge = () => {
      if (!popup.closed) popup.postMessage({ type: "received" }, serviceOrigin);
    };
    const listener = (event: MessageEvent) => {
      if (event.source !== popup || event.origin !== serviceOrigin) return;
      if (typeof event.data !== "object" || event.data === null) return;
      Promise.resolve()
        .then(() => onMessage(event.data as Record<string, unknown>, popup))
        .then(
          (value) => {
            if (value === undefined) return;
            acknowledge();
            settle(() => resolve(value));
          },
          (err: unknown) => {
            acknowledge();
            settle(() => reject(err));
          },
        );
    };
    window.addEventListener("message", listener);
    const closedCheck = setInterval(() => {
      if (popup.closed) settle(() => reject(new PopupClosedError()));
    }, CLOSED_CHECK_MS);
  });
}
