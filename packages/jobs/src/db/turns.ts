/**
 * A promise-chain mutex over one connection: `acquire()` resolves once every earlier holder
 * has let go, with the function that lets go. `held` says whether someone holds it now.
 */
export class Turns {
  private tail: Promise<void> = Promise.resolve();
  /** True while a holder has the connection. */
  held = false;

  acquire(): Promise<() => void> {
    const previous = this.tail;
    let release!: () => void;
    this.tail = new Promise<void>((resolve) => (release = resolve));
    return previous.then(() => {
      this.held = true;
      return () => {
        this.held = false;
        release();
      };
    });
  }
}
