/** A client that leaves a stream: reads its first content event, then cancels its reader. */
export async function leaveAfterFirstChunk(res: Response): Promise<void> {
  const reader = res.body!.getReader();
  const decoder = new TextDecoder();
  let seen = "";
  while (!seen.includes('"content":"')) seen += decoder.decode((await reader.read()).value ?? new Uint8Array());
  await reader.cancel();
}
