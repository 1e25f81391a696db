/**
 * The plain parts of the orders service (examples/orders.ts, and the Effect 4 edition's
 * packages/effect4/examples/orders.ts): what it keeps, and its fault hooks. No Effect here, so both editions share it.
 */
export interface Order {
  readonly id: string
  readonly [field: string]: unknown
}

/** The longest wait a fault hook accepts, in milliseconds. */
export const maxHookMillis = 30_000

/** The largest order body, in bytes, by default. */
export const maxOrderBytes = 4 * 1024

/** About how much the kept orders may take in all, by default (each counts its fields and `perOrderBytes`). */
export const maxKeptBytes = 32 * 1024 * 1024

/** What keeping one order costs beside its fields (the map entry, the object, its id): an estimate. */
const perOrderBytes = 256

export interface Kept {
  readonly order: Order
  readonly owner: string
  readonly bytes: number
}

/**
 * The orders kept for the read endpoints, newest last, at most about `maxBytes` in all: adding one past that
 * forgets the oldest first.
 */
export const keptOrders = (maxBytes: number) => {
  const byId = new Map<string, Kept>()
  let bytes = 0
  return {
    add: (order: Order, owner: string, fieldBytes: number) => {
      const cost = fieldBytes + perOrderBytes
      byId.set(order.id, { order, owner, bytes: cost })
      bytes += cost
      for (const [id, oldest] of byId) {
        if (bytes <= maxBytes || byId.size === 1) break
        byId.delete(id)
        bytes -= oldest.bytes
      }
    },
    get: (id: string): Kept | undefined => byId.get(id),
    all: (): IterableIterator<Kept> => byId.values(),
    size: () => byId.size,
    bytes: () => bytes
  }
}

export interface Hooks {
  readonly delayMs: number
  readonly afterCommitMs: number
  readonly crash: boolean
  readonly fail: boolean
}

/** The fault hooks of a request, or what is wrong with them. */
export const parseHooks = (params: URLSearchParams): Hooks | { readonly invalid: string } => {
  const wait = (name: string) => {
    const text = params.get(name)
    if (text === null) return 0
    return /^\d{1,5}$/.test(text) && Number(text) <= maxHookMillis ? Number(text) : undefined
  }
  const flag = (name: string, only: string) => {
    const text = params.get(name)
    return text === null ? false : text === only ? true : undefined
  }
  const delayMs = wait("delayMs")
  const afterCommitMs = wait("afterCommitMs")
  const crash = flag("crash", "1")
  const fail = flag("fail", "500")
  if (delayMs === undefined || afterCommitMs === undefined) {
    return { invalid: `?delayMs and ?afterCommitMs take a whole number of milliseconds from 0 to ${maxHookMillis}` }
  }
  if (crash === undefined) return { invalid: "?crash accepts only 1" }
  if (fail === undefined) return { invalid: "?fail accepts only 500" }
  return { delayMs, afterCommitMs, crash, fail }
}
