"""The on-call page in Airflow's UI: an Airflow plugin (registered by the package's
``airflow.plugins`` entry point) that mounts a small web app on Airflow's API server at
``/loader-oncall/`` and links it from the UI's navigation.

The page reads what ``loader status``, ``loader intervals`` and ``loader tables`` read (the
sources of ``LOADER_CONFIG`` in the API server's environment), when it is opened; only users
Airflow lets read DAGs see it.

Every Airflow task process loads the plugins (for their macros and listeners), so this module
imports nothing heavy: the web app and Airflow's API security are imported when the API server
asks for the app. (No ``from __future__ import annotations`` here: FastAPI reads the handlers'
annotations, which are local to ``_app``.)
"""

import functools
from typing import Any

from airflow.plugins_manager import AirflowPlugin

from loader.app import steps
from loader.app.airflow import DagSource
from loader.app.dag_state import delta_dag_state
from loader.core.config import Config, load_deployment
from loader.core.errors import REPORTED, describe
from loader.oncall import html, page

URL_PREFIX = "/loader-oncall"
LATEST_INTERVALS = 12


def _root(root_path: str) -> str:
    """The path of Airflow's UI: the app's mount point (``root_path``) without its own prefix."""
    return root_path.removesuffix(URL_PREFIX) + "/"


def _page(name: str | None, cfg: Config) -> page.SourcePage:
    dags = DagSource(name, cfg)
    status = steps.status(cfg)
    status.delta_dag = delta_dag_state(cfg.source.name, dags.dag_id(page.DELTA))
    records, total = steps.intervals(cfg, last=LATEST_INTERVALS)
    tables, tables_error = [], None
    try:
        tables = steps.tables(cfg)
    except REPORTED as exc:
        tables_error = f"the tables cannot be listed: {describe(exc)}"
    return page.source_page(
        cfg.source.name,
        dags.dag_id,
        status,
        records,
        total,
        tables,
        tables_error,
        cfg.source.alert_lag_seconds,
    )


def every_source(root: str) -> tuple[int, str]:
    """Every source at a glance (status code, page); a deployment of one source shows its page."""
    try:
        deployment = load_deployment()
    except REPORTED as exc:
        return 500, html.error_page("Loader on-call", describe(exc), root)
    if not deployment.many:
        (cfg,) = deployment.sources.values()
        return _source_page(None, cfg, root, many=False)
    pages, broken = [], dict(deployment.broken)
    for name, cfg in deployment.sources.items():
        try:
            pages.append(_page(name, cfg))
        except REPORTED as exc:
            broken[name] = describe(exc)
    return 200, html.index(pages, broken, root)


def one_source(name: str, root: str) -> tuple[int, str]:
    """One source of a deployment: where it is, its intervals and tables, the ways out."""
    try:
        deployment = load_deployment()
    except REPORTED as exc:
        return 500, html.error_page("Loader on-call", describe(exc), root)
    cfg = deployment.sources.get(name)
    if cfg is None:
        known = ", ".join(deployment.sources) or "none"
        message = deployment.broken.get(name) or f"no source {name} in the deployment (its sources: {known})"
        return 404, html.error_page(f"Source {name}", message, root)
    return _source_page(name if deployment.many else None, cfg, root, deployment.many)


def _source_page(name: str | None, cfg: Config, root: str, many: bool) -> tuple[int, str]:
    try:
        shown = _page(name, cfg)
    except REPORTED as exc:
        return 500, html.error_page(f"Source {cfg.source.name}", describe(exc), root)
    return 200, html.source(shown, root, many)


@functools.cache
def _app() -> Any:
    """The page's web app, built once, when the API server mounts it."""
    from airflow.api_fastapi.core_api.security import requires_access_dag
    from fastapi import Depends, FastAPI, Request
    from fastapi.responses import HTMLResponse

    app = FastAPI(title="Loader on-call", docs_url=None, redoc_url=None, openapi_url=None)
    readers = [Depends(requires_access_dag("GET"))]

    @app.get("/", response_class=HTMLResponse, dependencies=readers)
    def front(request: Request) -> HTMLResponse:
        code, body = every_source(_root(str(request.scope.get("root_path", ""))))
        return HTMLResponse(body, status_code=code)

    @app.get("/source/{name}", response_class=HTMLResponse, dependencies=readers)
    def source(name: str, request: Request) -> HTMLResponse:
        code, body = one_source(name, _root(str(request.scope.get("root_path", ""))))
        return HTMLResponse(body, status_code=code)

    return app


class LoaderOncallPlugin(AirflowPlugin):
    """The page's app on the API server and its link in the navigation: Browse, Loader on-call
    (it opens in a tab of its own)."""

    name = "loader_oncall"
    external_views = [  # noqa: RUF012 - Airflow's own attribute, read as declared
        {"name": "Loader on-call", "href": f"{URL_PREFIX}/", "destination": "nav", "category": "browse"}
    ]

    @property
    def fastapi_apps(self) -> list[dict[str, Any]]:  # type: ignore[override]
        """Read by the API server only (the app's imports would cost every task ~0.5 s)."""
        return [{"app": _app(), "url_prefix": URL_PREFIX, "name": "Loader on-call"}]
