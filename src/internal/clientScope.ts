import type { HttpServerRequest } from "@effect/platform"
import { Option } from "effect"

/** Who a request comes from, by default: the `X-Api-Key` header, else the remote address. */
export const defaultScope = (request: HttpServerRequest.HttpServerRequest): string =>
  request.headers["x-api-key"] ?? Option.getOrElse(request.remoteAddress, () => "anonymous")
