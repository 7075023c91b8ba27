// Which request paths carry an OpenAI body the filter reads (the query string is ignored).
import { API_CHAT, API_COMPLETIONS } from "./openai";

/** The OpenAI API of a request path, 0 when the body is not read (body-blind choice). */
export function apiOfPath(path: string): u8 {
  const q = path.indexOf("?");
  const p = q < 0 ? path : path.substring(0, q);
  if (p == "/v1/chat/completions") return API_CHAT;
  if (p == "/v1/completions") return API_COMPLETIONS;
  return 0;
}
