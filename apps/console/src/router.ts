import { useEffect, useState, type MouseEvent } from 'react';

/**
 * The console's pages are paths under /console (the service answers each with the app's page);
 * the query string carries a view's state (`?at=` of a replay) so a link reproduces what was seen.
 */
const BASE = '/console';

const current = () => ({
  path: location.pathname.slice(BASE.length) || '/',
  query: new URLSearchParams(location.search),
});

export function navigate(to: string, replace = false) {
  const url = `${BASE}${to}`;
  if (replace) history.replaceState(null, '', url);
  else history.pushState(null, '', url);
  dispatchEvent(new PopStateEvent('popstate'));
}

export function useRoute() {
  const [route, setRoute] = useState(current);
  useEffect(() => {
    const update = () => setRoute(current());
    addEventListener('popstate', update);
    return () => removeEventListener('popstate', update);
  }, []);
  return route;
}

/** Props of an in-app link: a real href (open in a new tab works), a click that stays in the app. */
export function linkTo(to: string) {
  return {
    href: `${BASE}${to}`,
    onClick: (event: MouseEvent<HTMLAnchorElement>) => {
      if (event.button !== 0 || event.metaKey || event.ctrlKey || event.shiftKey) return;
      event.preventDefault();
      navigate(to);
    },
  };
}
