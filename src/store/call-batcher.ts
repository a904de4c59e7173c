interface QueuedCall<In, Out> {
  input: In;
  resolve: (out: Out) => void;
  reject: (err: unknown) => void;
}

/**
 * Sends calls to a store together (PostgreSQL statements, Redis scripts): while one batch is under way, the calls that come
 * in queue, and go as the next batch the moment it ends. A call that finds nothing under
 * way goes at once, alone, so one at a time nothing waits; under load a batch holds what
 * arrived during one round trip of the last, so the round trips per call fall as the load
 * rises, with no timer to tune.
 *
 * `send` answers each input in order (the same length as its inputs). When it fails, every
 * call of that batch fails with its error.
 */
export class CallBatcher<In, Out> {
  private readonly queue: Array<QueuedCall<In, Out>> = [];
  private sending = false;

  constructor(
    private readonly send: (inputs: In[]) => Promise<Out[]>,
    private readonly maxBatch: number,
  ) {}

  call(input: In): Promise<Out> {
    return new Promise<Out>((resolve, reject) => {
      this.queue.push({ input, resolve, reject });
      if (!this.sending) void this.sendQueued();
    });
  }

  private async sendQueued(): Promise<void> {
    this.sending = true;
    while (this.queue.length > 0) {
      const batch = this.queue.splice(0, this.maxBatch);
      try {
        const outs = await this.send(batch.map((c) => c.input));
        if (outs.length !== batch.length) throw new Error(`a batch of ${batch.length} calls was answered with ${outs.length} results`);
        batch.forEach((c, i) => c.resolve(outs[i]!));
      } catch (err) {
        for (const c of batch) c.reject(err);
      }
    }
    this.sending = false;
  }
}
