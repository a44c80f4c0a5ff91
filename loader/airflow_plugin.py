"""The on-call page in Airflow's UI: an Airflow plugin (registered by the package's
``airflow.plugins`` entry point) that mounts a small web app on Airflow's API server at
``/loader-oncall/`` and links it from the UI's navigation.

The page reads what ``loader status``, ``loader intervals`` and ``loader tables`` read (the
sources of ``LOADER_CONFIG`` in the API server's environment), when it is opened; only users
Airflow lets read DAGs see it.
"""

from __future__ import annotations

from airflow.api_fastapi.core_api.security import requires_access_dag
from airflow.plugins_manager import AirflowPlugin
from fastapi import Depends, FastAPI, Request
from fastapi.responses import HTMLResponse

from loader import oncall, oncall_html, steps
from loader.airflow import DagSource
from loader.config import Config, load_deployment
from loader.errors import REPORTED, describe

URL_PREFIX = "/loader-oncall"
LATEST_INTERVALS = 12

app = FastAPI(title="Loader on-call", docs_url=None, redoc_url=None, openapi_url=None)
readers = [Depends(requires_access_dag("GET"))]


def _root(request: Request) -> str:
    """The path of Airflow's UI: the app's mount point without its own prefix."""
    return str(request.scope.get("root_path", "")).removesuffix(URL_PREFIX) + "/"


def _page(name: str | None, cfg: Config) -> oncall.SourcePage:
    status = steps.status(cfg)
    records, total = steps.intervals(cfg, last=LATEST_INTERVALS)
    tables, tables_error = [], None
    try:
        tables = steps.tables(cfg)
    except REPORTED as exc:
        tables_error = f"the tables cannot be listed: {describe(exc)}"
    return oncall.source_page(
        cfg.source.name,
        DagSource(name, cfg).dag_id,
        status,
        records,
        total,
        tables,
        tables_error,
        cfg.source.alert_lag_seconds,
    )


@app.get("/", response_class=HTMLResponse, dependencies=readers)
def every_source(request: Request) -> HTMLResponse:
    """Every source at a glance; a deployment of one source shows its page at once."""
    root = _root(request)
    try:
        deployment = load_deployment()
    except REPORTED as exc:
        return HTMLResponse(oncall_html.error_page("Loader on-call", describe(exc), root), status_code=500)
    if not deployment.many:
        (cfg,) = deployment.sources.values()
        return _source_response(None, cfg, root, many=False)
    pages, broken = [], dict(deployment.broken)
    for name, cfg in deployment.sources.items():
        try:
            pages.append(_page(name, cfg))
        except REPORTED as exc:
            broken[name] = describe(exc)
    return HTMLResponse(oncall_html.index(pages, broken, root))


@app.get("/source/{name}", response_class=HTMLResponse, dependencies=readers)
def one_source(name: str, request: Request) -> HTMLResponse:
    """One source of a deployment: where it is, its intervals and tables, the ways out."""
    root = _root(request)
    try:
        deployment = load_deployment()
    except REPORTED as exc:
        return HTMLResponse(oncall_html.error_page("Loader on-call", describe(exc), root), status_code=500)
    cfg = deployment.sources.get(name)
    if cfg is None:
        known = ", ".join(deployment.sources) or "none"
        message = deployment.broken.get(name) or f"no source {name} in the deployment (its sources: {known})"
        return HTMLResponse(oncall_html.error_page(f"Source {name}", message, root), status_code=404)
    return _source_response(name if deployment.many else None, cfg, root, deployment.many)


def _source_response(name: str | None, cfg: Config, root: str, many: bool) -> HTMLResponse:
    try:
        page = _page(name, cfg)
    except REPORTED as exc:
        title = f"Source {cfg.source.name}"
        return HTMLResponse(oncall_html.error_page(title, describe(exc), root), status_code=500)
    return HTMLResponse(oncall_html.source(page, root, many))


class LoaderOncallPlugin(AirflowPlugin):
    """The page's app on the API server and its link in the navigation: Browse, Loader on-call
    (it opens in a tab of its own)."""

    name = "loader_oncall"
    # Airflow's own attributes, read as they are declared.
    fastapi_apps = [{"app": app, "url_prefix": URL_PREFIX, "name": "Loader on-call"}]  # noqa: RUF012
    external_views = [  # noqa: RUF012
        {"name": "Loader on-call", "href": f"{URL_PREFIX}/", "destination": "nav", "category": "browse"}
    ]
