/**
 * Reads a child process's output stream line by line (UTF-8 safe across chunk ends),
 * calling `onLines` with each batch of complete lines and once more with the unterminated
 * tail. Shared by the test harness and the benchmark harness.
 */
export async function readLines(stream: ReadableStream<Uint8Array>, onLines: (lines: string[]) => void): Promise<void> {
  const decoder = new TextDecoder();
  let pending = "";
  for await (const chunk of stream) {
    pending += decoder.decode(chunk, { stream: true });
    const parts = pending.split("\n");
    pending = parts.pop()!;
    onLines(parts);
  }
  pending += decoder.decode();
  onLines(pending ? [pending] : []);
}
