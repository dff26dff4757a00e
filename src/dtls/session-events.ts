/**
 * The events of a DtlsSession ('data', 'close', 'migrate') without EventEmitter: an EventEmitter starts with a
 * dictionary of its own (about 250 bytes), and a server holds many idle sessions. Listeners run synchronously in the
 * order added, as with EventEmitter; a listener that throws propagates to the emitter.
 */

export interface SessionEventMap {
  data: [data: Buffer];
  close: [];
  migrate: [from: { address: string; port: number }];
}

type Name = keyof SessionEventMap;
type Listener<E extends Name> = (...args: SessionEventMap[E]) => void;
type Slot = ((...args: never[]) => void) | Array<(...args: never[]) => void> | undefined;

export class SessionEvents {
  #data: Slot;
  #close: Slot;
  #migrate: Slot;

  #get(event: Name): Slot {
    return event === 'data' ? this.#data : event === 'close' ? this.#close : this.#migrate;
  }

  #set(event: Name, slot: Slot): void {
    if (event === 'data') this.#data = slot;
    else if (event === 'close') this.#close = slot;
    else this.#migrate = slot;
  }

  on<E extends Name>(event: E, listener: Listener<E>): this {
    const slot = this.#get(event);
    const fn = listener as (...args: never[]) => void;
    this.#set(event, slot === undefined ? fn : Array.isArray(slot) ? [...slot, fn] : [slot, fn]);
    return this;
  }

  off<E extends Name>(event: E, listener: Listener<E>): this {
    const slot = this.#get(event);
    if (slot === listener) this.#set(event, undefined);
    else if (Array.isArray(slot)) {
      const i = slot.lastIndexOf(listener as (...args: never[]) => void);
      if (i >= 0) {
        const rest = slot.filter((_, j) => j !== i);
        this.#set(event, rest.length === 1 ? rest[0] : rest);
      }
    }
    return this;
  }

  once<E extends Name>(event: E, listener: Listener<E>): this {
    const wrapped = ((...args: SessionEventMap[E]) => {
      this.off(event, wrapped);
      listener(...args);
    }) as Listener<E>;
    return this.on(event, wrapped);
  }

  /** Calls the listeners of `event`; false when there were none. */
  emit<E extends Name>(event: E, ...args: SessionEventMap[E]): boolean {
    const slot = this.#get(event);
    if (slot === undefined) return false;
    if (Array.isArray(slot)) for (const fn of [...slot]) (fn as Listener<E>)(...args);
    else (slot as Listener<E>)(...args);
    return true;
  }

  listenerCount(event: Name): number {
    const slot = this.#get(event);
    return slot === undefined ? 0 : Array.isArray(slot) ? slot.length : 1;
  }
}
