/**
 * The machine's services for integration tests: `DATABASE_URL` and `REDIS_URL` with the usual local defaults.
 * Without a reachable service its tests are skipped locally (with a note) but fail in CI (`CI=true`).
 */
import { describe, it } from "@effect/vitest"
import { connect } from "node:net"

export const DATABASE_URL = process.env.DATABASE_URL ?? "postgres://postgres@127.0.0.1:5432/test"
export const REDIS_URL = process.env.REDIS_URL ?? "redis://127.0.0.1:6379"

const reachable = (url: string, defaultPort: number): Promise<boolean> =>
  new Promise((resolve) => {
    const { hostname, port } = new URL(url)
    const socket = connect({ host: hostname || "127.0.0.1", port: Number(port || defaultPort) })
    socket.setTimeout(1000)
    socket.once("connect", () => {
      socket.destroy()
      resolve(true)
    })
    socket.once("timeout", () => {
      socket.destroy()
      resolve(false)
    })
    socket.once("error", () => resolve(false))
  })

export const available = {
  postgres: await reachable(DATABASE_URL, 5432),
  redis: await reachable(REDIS_URL, 6379)
}

/** Registers `body` when every named service is reachable; otherwise skips it locally and fails it in CI. */
export const describeWith = (
  services: ReadonlyArray<keyof typeof available>,
  name: string,
  body: () => void
) => {
  const missing = services.filter((s) => !available[s])
  if (missing.length === 0) return describe(name, body)
  if (process.env.CI === "true" || process.env.CI === "1") {
    return describe(name, () => {
      it(`needs ${missing.join(" and ")} (CI=true: a missing service fails the run)`, () => {
        throw new Error(`not reachable: ${missing.join(", ")} (DATABASE_URL / REDIS_URL)`)
      })
    })
  }
  console.warn(`${name}: skipped — ${missing.join(" and ")} not reachable (see README, "Services")`)
  return describe.skip(name, body)
}
