/**
 * The Redis side of the limiter bench, Effect-free and the same for both editions: a connection, and the raw
 * `EVALSHA` of the store's own token-bucket script, read off the wire (the benches import only the public entry
 * points, so they cannot reach the script itself).
 */
import { Redis } from "ioredis"

export const redisUrl = (): string => process.env["REDIS_URL"] ?? "redis://127.0.0.1:6379"

/** A connected client (ioredis' defaults unless `enableAutoPipelining`), or undefined without a reachable Redis. */
export const connect = async (enableAutoPipelining = false): Promise<Redis | undefined> => {
  const client = new Redis(redisUrl(), {
    lazyConnect: true,
    connectTimeout: 1000,
    maxRetriesPerRequest: 1,
    enableAutoPipelining
  })
  client.on("error", () => {})
  try {
    await client.connect()
    await client.ping()
    return client
  } catch {
    client.disconnect()
    return undefined
  }
}

/** The first `EVALSHA` the client sends while `probe` runs: its arguments (sha, key count, keys, argv). */
export const captureEvalsha = async (
  client: Redis,
  probe: () => Promise<unknown>
): Promise<ReadonlyArray<string>> => {
  let args: ReadonlyArray<string> | undefined
  const send = client.sendCommand
  client.sendCommand = function(this: Redis, command, ...rest) {
    if (args === undefined && command.name.toLowerCase() === "evalsha") args = command.args.map(String)
    return send.call(this, command, ...rest)
  } as typeof send
  try {
    await probe()
  } finally {
    client.sendCommand = send
  }
  if (args === undefined) throw new Error("the limiter sent no EVALSHA")
  return args
}

/**
 * The store's script called directly, as the store called it for key `probeKey` (same key shape and arguments),
 * for `keys[i % keys.length]` and the current time: `nowArg` is the index in argv of the time in milliseconds.
 */
export const rawScript = (
  client: Redis,
  captured: ReadonlyArray<string>,
  probeKey: string,
  keys: ReadonlyArray<string>
) => {
  const [sha, numKeys, key, ...argv] = captured
  if (sha === undefined || numKeys !== "1" || key === undefined || !key.includes(probeKey)) {
    throw new Error(`unexpected EVALSHA shape: ${captured.join(" ")}`)
  }
  const [before, after] = [key.slice(0, key.indexOf(probeKey)), key.slice(key.indexOf(probeKey) + probeKey.length)]
  // the time argument: the one that reads as a millisecond timestamp of this decade
  const nowArg = argv.findIndex((a) => /^\d{13}$/.test(a))
  if (nowArg === -1) throw new Error(`no time argument in ${argv.join(" ")}`)
  return (i: number) => {
    const args = [...argv]
    args[nowArg] = String(Date.now())
    return client.evalsha(sha, 1, `${before}${keys[i % keys.length]}${after}`, ...args)
  }
}
