"""placeholder"""

from flask import Blueprint

bp = Blueprint("openapi", __name__)
