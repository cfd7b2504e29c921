import { METHODS } from 'node:http';
import type { INestApplication } from '@nestjs/common';

/** `METHOD /path` of every route the Express router holds, as the guard keys them. */
export function declaredRoutes(app: INestApplication): string[] {
  type Layer = { route?: { path: string; methods: Record<string, boolean> } };
  const { stack } = (app.getHttpAdapter().getInstance() as { router: { stack: Layer[] } }).router;
  return stack.flatMap(({ route }) => {
    // Other layers are middleware: body parsers, the error handler, the Swagger UI's static files.
    if (!route) return [];
    const methods = Object.keys(route.methods).filter((method) => route.methods[method]);
    // Nest mounts its middleware (request logging) as a route for every method on every path; it passes requests on.
    if (METHODS.every((method) => methods.includes(method.toLowerCase()))) return [];
    return methods.map((method) => `${method.toUpperCase()} ${route.path}`);
  });
}
